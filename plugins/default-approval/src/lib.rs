//! `default-approval`: the approval table from the owner's notes.
//!
//! | line | vote |
//! |---|---|
//! | `[REQUEST: create_worktree]`, `run_build`, `run_tests`, `open_draft_pr`, `push_branch` | approve |
//! | `[REQUEST: post_asana_comment]` | escalate: show the owner, wait |
//! | `[REQUEST: merge_pr]` | escalate, always |
//! | `[REQUEST: modify_unrelated_file]` | deny, and notify the owner |
//! | `[ESCALATE: scope_expansion]` | deny by default, and notify the owner |
//! | `[ESCALATE: *]`, any other request | escalate |
//!
//! Configuration (optional): `also_approve`, a list of further request
//! actions to approve silently. It can never approve `merge_pr`,
//! `post_asana_comment` or `modify_unrelated_file`.

use eagle_policy_sdk::{Config, Decision, Metadata, Policy, Request, RequestKind, export_policy};

/// Routine actions a worker may take without asking anyone.
const APPROVE_SILENTLY: &[&str] = &[
    "create_worktree",
    "run_build",
    "run_tests",
    "open_draft_pr",
    "push_branch",
];

/// Actions whose handling the table fixes; configuration cannot approve them.
const NEVER_SILENT: &[&str] = &["merge_pr", "post_asana_comment", "modify_unrelated_file"];

struct DefaultApproval;

impl Policy for DefaultApproval {
    fn metadata() -> Metadata {
        Metadata::new(
            "default-approval",
            env!("CARGO_PKG_VERSION"),
            "approves routine worker requests, escalates merges and Asana comments, denies unrelated edits and scope expansion",
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
