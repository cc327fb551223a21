//! `default-approval`: the approval table from the owner's notes.
//!
//! | line | vote |
//! |---|---|
//! | `[REQUEST: push_branch]`, `open_draft_pr`, `comment_on_pr`, `reply_thread`, `create_worktree`, `run_build`, `run_tests` | approve |
//! | `[REQUEST: post_asana_comment]` | escalate, always: show the owner, wait |
//! | `[REQUEST: merge_pr]` | escalate, always |
//! | `[REQUEST: run_command]` (an operator's `hook_rules`) | escalate |
//! | `[REQUEST: modify_unrelated_file]` | deny, and notify the owner |
//! | `[ESCALATE: scope_expansion]` | deny by default, and notify the owner |
//! | `[ESCALATE: *]`, any other request | escalate |
//!
//! Eagle carries out the approved effects itself, bound to the exact text
//! approved: a push of the named commit to the run's own branch, the draft
//! PR from it, the comment or reply as written.
//!
//! Configuration (optional): `also_approve`, a list of further request
//! actions to approve silently. It can never approve `merge_pr`,
//! `post_asana_comment`, `run_command` or `modify_unrelated_file`.

use eagle_policy_sdk::{Config, Decision, Metadata, Policy, Request, RequestKind, export_policy};

/// Routine actions a worker may take without asking anyone.
const APPROVE_SILENTLY: &[&str] = &[
    "push_branch",
    "open_draft_pr",
    "comment_on_pr",
    "reply_thread",
    "create_worktree",
    "run_build",
    "run_tests",
];

/// Actions whose handling the table fixes; configuration cannot approve them.
const NEVER_SILENT: &[&str] = &[
    "merge_pr",
    "post_asana_comment",
    "run_command",
    "modify_unrelated_file",
];

struct DefaultApproval;

impl Policy for DefaultApproval {
    fn metadata() -> Metadata {
        Metadata::new(
            "default-approval",
            env!("CARGO_PKG_VERSION"),
            "approves pushes, draft PRs, PR comments and replies, escalates merges, Asana comments and the operator's commands, denies unrelated edits and scope expansion",
        )
        .deciding()
    }

    fn decide(config: &Config, request: &Request) -> Decision {
        let action = request.action.as_str();
        match request.kind {
            RequestKind::Request => match action {
                "post_asana_comment" => {
                    Decision::escalate("posting an Asana comment: the owner sees it first")
                }
                "merge_pr" => Decision::escalate("merging a pull request always needs a human"),
                "run_command" => Decision::escalate(
                    "the operator's rules ask a human about this command",
                ),
                "modify_unrelated_file" => Decision::deny(
                    "modifying a file unrelated to the task is not allowed; stay within the task",
                )
                .notify_owner(),
                _ if APPROVE_SILENTLY.contains(&action) || also_approved(config, action) => {
                    Decision::approve()
                }
                _ => Decision::escalate(format!("unknown request {action}: a human decides")),
            },
            RequestKind::Escalate => match action {
                "scope_expansion" => Decision::deny(
                    "scope expansion is denied by default: finish the task as scoped; the owner is told",
                )
                .notify_owner(),
                _ => Decision::escalate(format!("the worker escalated {action}")),
            },
        }
    }
}

fn also_approved(config: &Config, action: &str) -> bool {
    !NEVER_SILENT.contains(&action)
        && config
            .strings("also_approve")
            .is_some_and(|list| list.iter().any(|a| a == action))
}

export_policy!(DefaultApproval);
