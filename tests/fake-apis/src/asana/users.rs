//! Users and their My Tasks lists. `me` stands for the token's user.

use serde_json::json;

use crate::asana::errors::ApiError;
use crate::asana::render;
use crate::asana::server::{Ctx, Outcome};
use crate::asana::state::{Section, State, UserTaskList};
use crate::common::query::last;

/// The user a path's `{user_gid}` names (`me` or a gid).
pub(crate) fn user_gid(state: &State, ctx: &Ctx<'_>, gid: &str) -> Result<String, ApiError> {
    let gid = if gid == "me" { ctx.user } else { gid };
    if state.users.contains_key(gid) {
        Ok(gid.to_owned())
    } else {
        Err(ApiError::unknown(gid))
    }
}

/// `GET /users/{user_gid}`.
pub(crate) fn user(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    let gid = user_gid(state, ctx, gid)?;
    Ok((
        200,
        json!({"data": ctx.out(render::user_full(state, &gid), false)}),
    ))
}

/// The My Tasks list of a user in a workspace, made on first use with the
/// section every list starts with.
pub(crate) fn ensure_user_task_list(state: &mut State, user: &str, workspace: &str) -> String {
    if let Some(l) = state
        .user_task_lists
        .values()
        .find(|l| l.owner == user && l.workspace == workspace)
    {
        return l.gid.clone();
    }
    let gid = state.new_gid();
    let section = state.new_gid();
    let now = state.clock.now_ms();
    state.sections.insert(
        section.clone(),
        Section {
            gid: section.clone(),
            name: "Recently assigned".to_owned(),
            container: gid.clone(),
            created_at: now,
        },
    );
    state.user_task_lists.insert(
        gid.clone(),
        UserTaskList {
            gid: gid.clone(),
            owner: user.to_owned(),
            workspace: workspace.to_owned(),
            sections: vec![section],
        },
    );
    gid
}

/// `GET /users/{user_gid}/user_task_list?workspace=`.
pub(crate) fn user_task_list(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    let Some(workspace) = last(&ctx.req.query, "workspace") else {
        return Err(ApiError::bad_request("workspace: Missing input"));
    };
    let user = user_gid(state, ctx, gid)?;
    if !state.workspaces.contains_key(workspace) {
        return Err(ApiError::unknown(workspace));
    }
    if !state.member(&user, workspace) {
        return Err(ApiError::forbidden());
    }
    let list = ensure_user_task_list(state, &user, workspace);
    let full = render::user_task_list(&state.user_task_lists[&list]);
    Ok((200, json!({"data": ctx.out(full, false)})))
}
