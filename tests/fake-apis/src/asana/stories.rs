//! Stories on a task: listing them (comments are `comment_added`) and adding
//! a comment, which must come wrapped in `{"data": …}` with `text` or
//! `html_text` (not both) and bumps the task's `modified_at`. Asana has no
//! idempotency key: a retried POST makes a second comment, as here.

use serde_json::{Value, json};

use crate::asana::errors::ApiError;
use crate::asana::params::{list_params, page};
use crate::asana::render;
use crate::asana::server::{Ctx, Outcome};
use crate::asana::state::{State, Story};

/// The task a path names, if the caller may see it.
pub(crate) fn visible_task(state: &State, ctx: &Ctx<'_>, gid: &str) -> Result<(), ApiError> {
    let Some(task) = state.tasks.get(gid) else {
        return Err(ApiError::unknown(gid));
    };
    if !state.member(ctx.user, &task.workspace) {
        return Err(ApiError::forbidden());
    }
    Ok(())
}

/// `GET /tasks/{task_gid}/stories`: oldest first.
pub(crate) fn list(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    visible_task(state, ctx, gid)?;
    let p = list_params(state, ctx.req)?;
    let all: Vec<Value> = state
        .stories
        .iter()
        .filter(|s| s.task == gid)
        .map(|s| render::story(state, s))
        .collect();
    let (items, next) = page(state, &ctx.base, ctx.req, &p, &all);
    let data: Vec<Value> = items.into_iter().map(|s| ctx.out(s, true)).collect();
    let mut body = json!({"data": data});
    if let Some(next) = next {
        body["next_page"] = next;
    }
    Ok((200, body))
}

/// `POST /tasks/{task_gid}/stories`: 201 with the story.
pub(crate) fn create(state: &mut State, ctx: &Ctx<'_>, gid: &str) -> Outcome {
    let req = ctx.req;
    if !req
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/json"))
    {
        state.violation(format!(
            "{}: the body is not sent as application/json",
            req.what()
        ));
    }
    let body: Value = serde_json::from_slice(&req.body)
        .map_err(|_| ApiError::bad_request("Could not parse request data, invalid JSON"))?;
    let Some(data) = body.get("data").and_then(Value::as_object) else {
        return Err(ApiError::bad_request(
            "data: Missing input (write bodies are wrapped in {\"data\": {…}})",
        ));
    };
    if let Some(map) = body.as_object()
        && map.len() > 1
    {
        state.violation(format!("{}: members beside `data` in the body", req.what()));
    }
    let unknown: Vec<&str> = data
        .keys()
        .map(String::as_str)
        .filter(|k| !["text", "html_text", "is_pinned", "sticker_name"].contains(k))
        .collect();
    if !unknown.is_empty() {
        state.violation(format!(
            "{}: data members a comment does not take: {}",
            req.what(),
            unknown.join(", ")
        ));
    }
    visible_task(state, ctx, gid)?;
    let text = data.get("text").map(|v| {
        v.as_str()
            .ok_or_else(|| ApiError::bad_request("text: Not a string"))
    });
    let html = data.get("html_text").map(|v| {
        v.as_str()
            .ok_or_else(|| ApiError::bad_request("html_text: Not a string"))
    });
    let (text, html_text) = match (text.transpose()?, html.transpose()?) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "You may only specify one of text and html_text",
            ));
        }
        (None, None) => return Err(ApiError::bad_request("text: Missing input")),
        (Some(text), None) => (text.to_owned(), format!("<body>{}</body>", escape(text))),
        (None, Some(html)) => {
            if !well_formed_body(html) {
                return Err(ApiError::bad_request(format!(
                    "html_text: Invalid XML, or not rooted in <body>: {html:?}"
                )));
            }
            (plain(html), html.to_owned())
        }
    };
    let story_gid = state.new_gid();
    let now = state.clock.now_ms();
    let story = Story {
        gid: story_gid,
        task: gid.to_owned(),
        created_by: Some(ctx.user.to_owned()),
        created_at: now,
        text,
        html_text,
        resource_subtype: "comment_added".to_owned(),
        kind: "comment".to_owned(),
    };
    state.stories.push(story.clone());
    if let Some(task) = state.tasks.get_mut(gid) {
        task.modified_at = now;
    }
    let full = render::story(state, &story);
    Ok((201, json!({"data": ctx.out(full, false)})))
}

/// Escapes text for rich text.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The text of rich text: tags dropped, the basic entities decoded.
pub(crate) fn plain(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// Whether rich text is one `<body>` element of balanced tags. (Asana's
/// exact XML checks are not documented; this is the fake's reading of
/// "valid XML rooted in `<body>`".)
pub(crate) fn well_formed_body(html: &str) -> bool {
    let html = html.trim();
    if !html.starts_with("<body>") || !html.ends_with("</body>") {
        return false;
    }
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        if text.contains('<') || !entities_ok(text) {
            return false;
        }
        let Some(close) = rest[open..].find('>') else {
            return false;
        };
        let tag = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            if stack.pop() != Some(name.trim()) {
                return false;
            }
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().unwrap_or("");
            if name.is_empty() {
                return false;
            }
            if stack.is_empty() && name != "body" {
                return false;
            }
            stack.push(name);
        }
        if stack.is_empty() && !rest.trim().is_empty() {
            return false;
        }
    }
    stack.is_empty() && entities_ok(rest)
}

fn entities_ok(text: &str) -> bool {
    text.split('&').skip(1).all(|after| {
        let Some(end) = after.find(';') else {
            return false;
        };
        let name = &after[..end];
        ["amp", "lt", "gt", "quot", "apos"].contains(&name) || name.starts_with('#')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rich_text_must_be_one_body_of_balanced_tags() {
        let cases = [
            ("<body>hi</body>", true),
            (
                "<body><strong>a</strong> &amp; <a href=\"x\">b</a><br/></body>",
                true,
            ),
            ("<body>a</body><body>b</body>", false),
            ("<p>a</p>", false),
            ("<body><em>a</body>", false),
            ("<body>a & b</body>", false),
            ("<body><em>a</strong></em></body>", false),
            ("hi", false),
        ];
        for (html, ok) in cases {
            assert_eq!(well_formed_body(html), ok, "{html}");
        }
        assert_eq!(plain("<body>a &amp; <em>b</em></body>"), "a & b");
        assert_eq!(escape("a<b>&"), "a&lt;b&gt;&amp;");
    }
}
