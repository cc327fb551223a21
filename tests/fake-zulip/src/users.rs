//! `GET /users/me`, `GET /users/{user_id}` (and `{email}`),
//! `GET /users/me/subscriptions` and the unauthenticated
//! `GET /server_settings`.

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::messages::avatar_url;
use crate::params::Params;
use crate::state::{State, User};

/// The Zulip version the fake claims to be.
pub(crate) const ZULIP_VERSION: &str = "10.2";
/// Its API feature level.
pub(crate) const FEATURE_LEVEL: u64 = 372;

/// The `role` of every user: member.
const ROLE_MEMBER: u64 = 400;

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `GET /users/me`.
pub(crate) fn users_me(state: &State, me: u64) -> Result<Map<String, Value>, ApiError> {
    let user = state
        .users
        .get(&me)
        .ok_or_else(|| ApiError::unauthorized("Invalid API key"))?;
    Ok(object(json!({
        "avatar_url": avatar_url(user),
        "avatar_version": 1,
        "email": user.email,
        "full_name": user.full_name,
        "is_admin": false,
        "is_owner": false,
        "role": ROLE_MEMBER,
        "is_guest": false,
        "is_bot": user.is_bot,
        "is_active": user.active,
        "timezone": "",
        "date_joined": user.date_joined,
        "max_message_id": state.max_message_id(),
        "user_id": user.id,
        "delivery_email": user.email,
        "profile_data": {},
    })))
}

fn user_json(user: &User, client_gravatar: bool) -> Value {
    let avatar = if client_gravatar {
        Value::Null
    } else {
        json!(avatar_url(user))
    };
    let mut u = object(json!({
        "user_id": user.id,
        "delivery_email": user.email,
        "email": user.email,
        "full_name": user.full_name,
        "date_joined": user.date_joined,
        "is_active": user.active,
        "is_owner": false,
        "is_admin": false,
        "is_guest": false,
        "is_bot": user.is_bot,
        "role": ROLE_MEMBER,
        "timezone": "",
        "avatar_url": avatar,
        "avatar_version": 1,
    }));
    if user.is_bot {
        // A generic bot, owned by nobody the fake knows.
        u.insert("bot_type".into(), json!(1));
        u.insert("bot_owner_id".into(), Value::Null);
    }
    Value::Object(u)
}

/// `GET /users/{user_id}` and `GET /users/{email}`.
pub(crate) fn get_user(
    state: &State,
    which: &str,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let client_gravatar = p.bool("client_gravatar")?.unwrap_or(true);
    let with_fields = p.bool("include_custom_profile_fields")?.unwrap_or(false);
    let user = match which.parse::<u64>() {
        Ok(id) => state.users.get(&id),
        Err(_) => state.user_by_email(which),
    };
    let user = user.ok_or_else(|| ApiError::bad_request("No such user".into()))?;
    let mut json = user_json(user, client_gravatar);
    if with_fields && let Value::Object(map) = &mut json {
        map.insert("profile_data".into(), json!({}));
    }
    let mut data = Map::new();
    data.insert("user".into(), json);
    Ok(data)
}

/// `GET /users/me/subscriptions`.
pub(crate) fn subscriptions(
    state: &State,
    me: u64,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let include_subscribers = p.bool("include_subscribers")?.unwrap_or(false);
    let subs: Vec<Value> = state
        .channels
        .values()
        .filter(|c| c.subscribers.contains(&me))
        .map(|c| {
            let first_message_id = state
                .messages
                .values()
                .find(|m| m.channel_id() == Some(c.id))
                .map(|m| m.id);
            let mut s = object(json!({
                "stream_id": c.id,
                "name": c.name,
                "description": "",
                "rendered_description": "",
                "date_created": c.date_created,
                "creator_id": null,
                "invite_only": !c.public,
                "desktop_notifications": null,
                "email_notifications": null,
                "wildcard_mentions_notify": null,
                "push_notifications": null,
                "audible_notifications": null,
                "pin_to_top": false,
                "is_muted": false,
                "in_home_view": true,
                "is_announcement_only": false,
                "is_web_public": false,
                "color": "#76ce90",
                "stream_post_policy": 1,
                "message_retention_days": null,
                "history_public_to_subscribers": true,
                "first_message_id": first_message_id,
                "is_recently_active": true,
                "stream_weekly_traffic": null,
                "can_add_subscribers_group": 11,
                "can_remove_subscribers_group": 11,
                "can_administer_channel_group": 11,
                "can_send_message_group": 12,
                "can_subscribe_group": 11,
                "is_archived": false,
            }));
            if include_subscribers {
                s.insert("subscribers".into(), json!(c.subscribers));
            }
            Value::Object(s)
        })
        .collect();
    let mut data = Map::new();
    data.insert("subscriptions".into(), json!(subs));
    Ok(data)
}

/// `GET /server_settings`.
pub(crate) fn server_settings(realm_url: &str) -> Map<String, Value> {
    object(json!({
        "authentication_methods": {
            "password": true, "dev": false, "email": true, "ldap": false,
            "remoteuser": false, "github": false, "azuread": false, "gitlab": false,
            "apple": false, "google": false, "saml": false, "openid connect": false,
        },
        "external_authentication_methods": [],
        "zulip_feature_level": FEATURE_LEVEL,
        "zulip_version": ZULIP_VERSION,
        "zulip_merge_base": ZULIP_VERSION,
        "push_notifications_enabled": false,
        "is_incompatible": false,
        "email_auth_enabled": true,
        "require_email_format_usernames": true,
        "realm_uri": realm_url,
        "realm_url": realm_url,
        "realm_name": "Eagle test realm",
        "realm_icon": format!("{realm_url}/static/images/logo/zulip-icon-128x128.png"),
        "realm_description": "<p>The fake Zulip of Eagle's tests.</p>",
        "realm_web_public_access_enabled": false,
    }))
}
