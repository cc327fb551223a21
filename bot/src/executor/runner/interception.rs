//! What a worker's egress proxy reads its model API's calls by: the calls
//! each kind of worker needs.

/// The calls of its model API that Claude Code needs: at start and in a
/// session the pinned release sends only `POST /v1/messages?beta=true`;
/// it counts tokens with `count_tokens` when it compacts a long one.
pub const CLAUDE_CALLS: &[(&str, &str)] = &[
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/count_tokens"),
];
