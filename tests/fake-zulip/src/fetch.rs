//! `GET /messages`: anchors, `num_before`/`num_after`, `include_anchor`,
//! narrows over shared channel history, and the `found_*` flags, ported
//! from `zerver/lib/narrow.py` (`limit_query_to_range`,
//! `post_process_limited_query`).

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::messages::{message_json, viewer_flags};
use crate::narrow::{parse_fetch_narrow, resolve_fetch_narrow};
use crate::params::Params;
use crate::state::State;

/// `LARGER_THAN_MAX_MESSAGE_ID`, the anchor `newest` stands for.
pub(crate) const LARGER_THAN_MAX_MESSAGE_ID: u64 = 10_000_000_000_000_000;
/// `MAX_MESSAGES_PER_FETCH`.
const MAX_MESSAGES_PER_FETCH: u64 = 5000;

/// A requested anchor; `None` is `first_unread`.
fn parse_anchor(raw: Option<&str>, use_first_unread: bool) -> Result<Option<u64>, ApiError> {
    if use_first_unread {
        return Ok(None);
    }
    match raw {
        None => Err(ApiError::malformed(
            "Missing 'anchor' argument.".into(),
            "GET /messages without anchor".into(),
        )),
        Some("oldest") => Ok(Some(0)),
        Some("newest") => Ok(Some(LARGER_THAN_MAX_MESSAGE_ID)),
        Some("first_unread") => Ok(None),
        Some(text) => match text.trim().parse::<i128>() {
            Ok(n) if n < 0 => Ok(Some(0)),
            Ok(n) => Ok(Some(
                u64::try_from(n)
                    .unwrap_or(u64::MAX)
                    .min(LARGER_THAN_MAX_MESSAGE_ID),
            )),
            Err(_) => Err(ApiError::malformed(
                "Invalid anchor".into(),
                format!("anchor {text:?} is not valid"),
            )),
        },
    }
}

/// `GET /messages`.
pub(crate) fn get_messages(
    state: &State,
    viewer: u64,
    p: &Params<'_>,
) -> Result<Map<String, Value>, ApiError> {
    let use_first_unread = p.bool("use_first_unread_anchor")?.unwrap_or(false);
    let include_anchor = p.bool("include_anchor")?.unwrap_or(true);
    let apply_markdown = p.bool("apply_markdown")?.unwrap_or(true);
    let client_gravatar = p.bool("client_gravatar")?.unwrap_or(true);
    p.bool("allow_empty_topic_name")?;
    if p.get("message_ids").is_some() {
        return Err(ApiError::malformed(
            "message_ids is not supported by the fake".into(),
            "GET /messages with message_ids, which the fake does not implement".into(),
        ));
    }
    let anchor = parse_anchor(p.get("anchor"), use_first_unread)?;
    let num_before = p
        .non_negative("num_before")?
        .ok_or_else(|| ApiError::missing("num_before"))?;
    let num_after = p
        .non_negative("num_after")?
        .ok_or_else(|| ApiError::missing("num_after"))?;
    if num_before.saturating_add(num_after) > MAX_MESSAGES_PER_FETCH {
        return Err(ApiError::bad_request(format!(
            "Too many messages requested (maximum {MAX_MESSAGES_PER_FETCH})."
        )));
    }
    let terms = match p.json("narrow")? {
        Some(value) => parse_fetch_narrow(&value)?,
        None => Vec::new(),
    };
    let narrow = resolve_fetch_narrow(state, viewer, &terms)?;

    // Every message the query may return, ascending, with the viewer's flags.
    let candidates: Vec<(u64, Vec<String>)> = state
        .messages
        .values()
        .filter(|m| match narrow.history_channel {
            Some(channel) => m.channel_id() == Some(channel) || m.flags.contains_key(&viewer),
            None => m.flags.contains_key(&viewer),
        })
        .map(|m| (m.id, viewer_flags(m, viewer)))
        .filter(|(id, flags)| {
            state
                .messages
                .get(id)
                .is_some_and(|m| narrow.matches(state, m, flags))
        })
        .collect();

    let anchor = anchor.unwrap_or_else(|| {
        candidates
            .iter()
            .find(|(_, flags)| !flags.iter().any(|f| f == "read"))
            .map_or(LARGER_THAN_MAX_MESSAGE_ID, |(id, _)| *id)
    });
    let anchored_to_left = anchor == 0;
    let anchored_to_right = anchor >= LARGER_THAN_MAX_MESSAGE_ID;
    let num_after = if anchored_to_right { 0 } else { num_after };
    let ids: Vec<u64> = candidates.iter().map(|(id, _)| *id).collect();
    let rows = limit_to_range(
        &ids,
        num_before,
        num_after,
        anchor,
        include_anchor,
        anchored_to_left,
        anchored_to_right,
    );
    let limited = post_process(
        &rows,
        num_before,
        num_after,
        anchor,
        anchored_to_left,
        anchored_to_right,
    );

    let messages: Vec<Value> = limited
        .rows
        .iter()
        .filter_map(|id| state.messages.get(id))
        .map(|m| {
            let mut json = message_json(state, m, apply_markdown, client_gravatar);
            json.insert("flags".into(), json!(viewer_flags(m, viewer)));
            Value::Object(json)
        })
        .collect();
    let mut data = Map::new();
    data.insert("anchor".into(), json!(anchor));
    data.insert("found_newest".into(), json!(limited.found_newest));
    data.insert("found_oldest".into(), json!(limited.found_oldest));
    data.insert("found_anchor".into(), json!(limited.found_anchor));
    data.insert("history_limited".into(), json!(false));
    data.insert("messages".into(), json!(messages));
    Ok(data)
}

/// `limit_query_to_range` over ascending ids; the result is ascending.
fn limit_to_range(
    ids: &[u64],
    num_before: u64,
    num_after: u64,
    anchor: u64,
    include_anchor: bool,
    anchored_to_left: bool,
    anchored_to_right: bool,
) -> Vec<u64> {
    let need_before = !anchored_to_left && num_before > 0;
    let need_after = !anchored_to_right && num_after > 0;
    let take = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    // (inclusive upper bound, limit) and (inclusive lower bound, limit).
    let (before, after) = match (need_before, need_after) {
        (true, true) => (
            Some((anchor.checked_sub(1), num_before)),
            Some((anchor, num_after + 1)),
        ),
        (true, false) => {
            let bound = if include_anchor {
                Some(anchor)
            } else {
                anchor.checked_sub(1)
            };
            let limit = num_before + u64::from(!anchored_to_right && include_anchor);
            (Some((bound, limit)), None)
        }
        (false, true) => (
            None,
            Some((
                anchor + u64::from(!include_anchor),
                num_after + u64::from(include_anchor),
            )),
        ),
        (false, false) => return ids.iter().copied().filter(|id| *id == anchor).collect(),
    };
    let mut rows = Vec::new();
    if let Some((bound, limit)) = before {
        let below: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| anchored_to_right || bound.is_some_and(|b| *id <= b))
            .collect();
        let skip = below.len().saturating_sub(take(limit));
        rows.extend_from_slice(&below[skip..]);
    }
    if let Some((bound, limit)) = after {
        rows.extend(
            ids.iter()
                .copied()
                .filter(|id| anchored_to_left || *id >= bound)
                .take(take(limit)),
        );
    }
    rows.sort_unstable();
    rows.dedup();
    rows
}

struct Limited {
    rows: Vec<u64>,
    found_anchor: bool,
    found_newest: bool,
    found_oldest: bool,
}

/// `post_process_limited_query`.
fn post_process(
    rows: &[u64],
    num_before: u64,
    num_after: u64,
    anchor: u64,
    anchored_to_left: bool,
    anchored_to_right: bool,
) -> Limited {
    let (mut before, anchor_rows, mut after): (Vec<u64>, Vec<u64>, Vec<u64>) = if anchored_to_right
    {
        (rows.to_vec(), Vec::new(), Vec::new())
    } else {
        (
            rows.iter().copied().filter(|id| *id < anchor).collect(),
            rows.iter().copied().filter(|id| *id == anchor).collect(),
            rows.iter().copied().filter(|id| *id > anchor).collect(),
        )
    };
    let num_after = if anchored_to_right { 0 } else { num_after };
    let take = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    if num_before > 0 {
        let skip = before.len().saturating_sub(take(num_before));
        before.drain(..skip);
    }
    if num_after > 0 {
        after.truncate(take(num_after));
    }
    let found_anchor = anchor_rows.len() == 1;
    let found_oldest = anchored_to_left || (before.len() as u64) < num_before;
    let found_newest = anchored_to_right || (after.len() as u64) < num_after;
    let mut rows = before;
    rows.extend(anchor_rows);
    rows.extend(after);
    Limited {
        rows,
        found_anchor,
        found_newest,
        found_oldest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows, found_anchor, found_oldest, found_newest.
    type Outcome = (Vec<u64>, bool, bool, bool);

    fn run(ids: &[u64], before: u64, after: u64, anchor: u64, include: bool) -> Outcome {
        let left = anchor == 0;
        let right = anchor >= LARGER_THAN_MAX_MESSAGE_ID;
        let after = if right { 0 } else { after };
        let rows = limit_to_range(ids, before, after, anchor, include, left, right);
        let l = post_process(&rows, before, after, anchor, left, right);
        (l.rows, l.found_anchor, l.found_oldest, l.found_newest)
    }

    #[test]
    fn anchors_behave_like_zulip() {
        let ids = [10, 12, 15, 20, 21];
        let newest = LARGER_THAN_MAX_MESSAGE_ID;
        let table: &[(u64, u64, u64, bool, Outcome)] = &[
            // anchor=newest, the last 2: not the oldest.
            (2, 0, newest, true, (vec![20, 21], false, false, true)),
            // anchor=newest, more than there are.
            (
                20,
                0,
                newest,
                true,
                (vec![10, 12, 15, 20, 21], false, true, true),
            ),
            // anchor=oldest.
            (0, 2, 0, true, (vec![10, 12], false, true, false)),
            // catch-up after 12, anchor excluded.
            (0, 10, 12, false, (vec![15, 20, 21], false, false, true)),
            // catch-up after 12, anchor included.
            (0, 10, 12, true, (vec![12, 15, 20, 21], true, false, true)),
            // both sides around 15.
            (1, 1, 15, true, (vec![12, 15, 20], true, false, false)),
            // an anchor that is not a message id.
            (1, 1, 16, true, (vec![15, 20], false, false, false)),
            // nothing on either side: just the anchor.
            (0, 0, 15, true, (vec![15], true, false, false)),
        ];
        for (before, after, anchor, include, expected) in table {
            assert_eq!(
                run(&ids, *before, *after, *anchor, *include),
                *expected,
                "before={before} after={after} anchor={anchor} include={include}"
            );
        }
    }
}
