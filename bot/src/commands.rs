//! Chat commands: their definitions, the pure parser and the handlers.
//!
//! A command is a line that starts with `!` (also right after a leading
//! @-mention of the bot), outside code fences and quotes. [`SPECS`] is the one
//! definition of every command: the parser takes each command's usage from
//! it and `!help` is generated from it, so the two cannot drift apart.

mod control;
mod handlers;
mod parse;
mod status;

pub use handlers::{CommandReply, execute, queue as queue_task, task_gid};
pub use parse::{
    BotNames, Invocation, ParseError, mentions_bot, parse_message, strip_leading_mention,
    without_mentions,
};

/// Who may use a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone in the organisation.
    Anyone,
    /// Only the profile's `approvers` (an empty list means nobody).
    Approvers,
}

/// The definition of one command.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// The word after `!`.
    pub name: &'static str,
    /// The arguments, as shown in the usage line.
    pub args: &'static str,
    /// One line for the command list.
    pub summary: &'static str,
    /// More, for `!help <command>`.
    pub details: &'static str,
    pub access: Access,
}

impl CommandSpec {
    /// `!name args`, as typed.
    pub fn usage(&self) -> String {
        if self.args.is_empty() {
            format!("!{}", self.name)
        } else {
            format!("!{} {}", self.name, self.args)
        }
    }
}

/// Every command, in the order `!help` lists them.
pub const SPECS: &[CommandSpec] = &[
    CommandSpec {
        name: "help",
        args: "[command]",
        summary: "list the commands, or explain one",
        details: "`!help` lists every command; `!help queue` explains `!queue`.",
        access: Access::Anyone,
    },
    CommandSpec {
        name: "queue",
        args: "[title]",
        summary: "put a task into the inbox, or list the open inbox",
        details: "`!queue Fix the tab preview` captures a task with that title; the following lines \
                  of the message become its description. Eagle answers with the task's id. \
                  `!queue` alone lists the open tasks.",
        access: Access::Anyone,
    },
    CommandSpec {
        name: "status",
        args: "[task id | run <run id> | page <n>]",
        summary: "show what is queued and running",
        details: "`!status` counts tasks by status and runs by state, and lists the open ones \
                  (`!status page 2` shows more). `!status 12` shows task 12 with its runs; \
                  `!status run 42` shows run 42.",
        access: Access::Anyone,
    },
    CommandSpec {
        name: "why",
        args: "task <id> | run <id> | request <id>",
        summary: "show the audit trail of a task, run or request",
        details: "`!why task 12` lists who or what decided what about task 12, when, and why, \
                  including the policy plugin, its version and content hash.",
        access: Access::Anyone,
    },
    CommandSpec {
        name: "approve",
        args: "<run id> [request id] [note]",
        summary: "approve a worker's pending request",
        details: "`!approve 42` approves the request run 42 is waiting on (when exactly one \
                  waits); `!approve 42 7` approves request 7 of run 42 exactly. Words after the \
                  ids are a note the worker gets when it is resumed: `!approve 42 7 squash it first`. \
                  An approval binds to that request and its parameters: the worker may do exactly \
                  what it asked, once.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "deny",
        args: "<run id> [request id] <reason>",
        summary: "deny a worker's pending request, with a reason",
        details: "`!deny 42 out of scope` denies the request run 42 is waiting on; \
                  `!deny 42 7 not now` denies request 7. The reason reaches the worker.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "go",
        args: "<task id>",
        summary: "approve a task for execution",
        details: "`!go 12` approves task 12 and queues a run for it; a runner starts a worker \
                  on it as soon as a slot is free. Its progress is posted in the executor channel, \
                  topic `run <id>`.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "cancel",
        args: "<run id>",
        summary: "stop a run for good",
        details: "`!cancel 42` stops run 42's worker (on whichever host it runs) and marks the \
                  run cancelled; its open requests expire.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "hold",
        args: "<run id> | all",
        summary: "stop a run's worker at a safe point and keep it stopped",
        details: "`!hold 42` stops run 42's worker at a safe point and starts none until \
                  `!unhold 42`. `!hold all` does that for every run and starts nothing new, \
                  until `!unhold all`.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "unhold",
        args: "<run id> | all",
        summary: "let a held run continue",
        details: "`!unhold 42` releases a run held with `!hold`; `!unhold all` undoes `!hold all`.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "retry",
        args: "<run id>",
        summary: "start a held or abandoned run again",
        details: "`!retry 42` gives run 42 a fresh worker after it was held for too many failed \
                  attempts or its cost cap (which it raises by as much again), or after it was \
                  abandoned.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "pause",
        args: "",
        summary: "stop claiming new work",
        details: "`!pause` lets running workers finish but starts no new ones until `!resume`.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "resume",
        args: "",
        summary: "claim new work again",
        details: "`!resume` undoes `!pause`.",
        access: Access::Approvers,
    },
    CommandSpec {
        name: "reanalyze",
        args: "[confirm]",
        summary: "analyse skipped tasks again that the filters now keep",
        details: "`!reanalyze` counts the skipped tasks the current filters would keep and changes \
                  nothing; `!reanalyze confirm` puts them back, and the analyzer posts one summary \
                  in the inbox topic when it is through.",
        access: Access::Approvers,
    },
];

/// Looks a command up by name (case-insensitive).
pub fn spec(name: &str) -> Option<&'static CommandSpec> {
    SPECS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// What `!status` is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusQuery {
    /// Counts and the open tasks and runs, one page of them.
    Overview {
        page: u32,
    },
    Task(i64),
    Run(i64),
}

/// What `!why` is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhyTarget {
    Task(i64),
    Run(i64),
    Request(i64),
}

impl WhyTarget {
    /// The audit log's subject for this target.
    pub fn subject(self) -> String {
        match self {
            WhyTarget::Task(id) => format!("task:{id}"),
            WhyTarget::Run(id) => format!("run:{id}"),
            WhyTarget::Request(id) => format!("request:{id}"),
        }
    }
}

/// One run, or every run (`!hold all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOrAll {
    Run(i64),
    All,
}

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help {
        command: Option<&'static str>,
    },
    /// `title` is `None` for a bare `!queue` (list the inbox).
    Queue {
        title: Option<String>,
        description: String,
    },
    Status(StatusQuery),
    Why(WhyTarget),
    Approve {
        run: i64,
        request: Option<i64>,
        note: Option<String>,
    },
    Deny {
        run: i64,
        request: Option<i64>,
        reason: String,
    },
    Go {
        task: i64,
    },
    Cancel {
        run: i64,
    },
    Hold {
        target: RunOrAll,
    },
    Unhold {
        target: RunOrAll,
    },
    Retry {
        run: i64,
    },
    Pause,
    Resume,
    /// `confirm`: put them back; otherwise count only.
    Reanalyze {
        confirm: bool,
    },
}

impl Command {
    /// The definition this command was parsed from.
    pub fn spec(&self) -> &'static CommandSpec {
        let name = match self {
            Command::Help { .. } => "help",
            Command::Queue { .. } => "queue",
            Command::Status(_) => "status",
            Command::Why(_) => "why",
            Command::Approve { .. } => "approve",
            Command::Deny { .. } => "deny",
            Command::Go { .. } => "go",
            Command::Cancel { .. } => "cancel",
            Command::Hold { .. } => "hold",
            Command::Unhold { .. } => "unhold",
            Command::Retry { .. } => "retry",
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::Reanalyze { .. } => "reanalyze",
        };
        spec(name).expect("every command has a spec")
    }
}

/// The text of `!help`, or of `!help <command>`.
pub fn help_text(command: Option<&str>) -> String {
    match command.and_then(spec) {
        Some(spec) => {
            let who = match spec.access {
                Access::Anyone => "Anyone may use it.",
                Access::Approvers => "Only the profile's approvers may use it.",
            };
            format!(
                "`{}`: {}\n{}\n{who}",
                spec.usage(),
                spec.summary,
                spec.details
            )
        }
        None => {
            let mut out = String::from("Commands (start a line with them, or mention me first):\n");
            for spec in SPECS {
                let mut notes = Vec::new();
                if spec.access == Access::Approvers {
                    notes.push("approvers");
                }
                let notes = if notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", notes.join(", "))
                };
                out.push_str(&format!("* `{}`: {}{notes}\n", spec.usage(), spec.summary));
            }
            out.push_str("`!help <command>` explains one.");
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_is_pinned() {
        expect_test::expect_file!["commands/snapshots/help.txt"].assert_eq(&help_text(None));
        expect_test::expect_file!["commands/snapshots/help-queue.txt"]
            .assert_eq(&help_text(Some("queue")));
    }

    #[test]
    fn every_spec_is_reachable_and_unique() {
        let mut names: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SPECS.len());
        for spec in SPECS {
            assert!(spec.name.chars().all(|c| c.is_ascii_lowercase()));
            assert!(!spec.summary.ends_with('.'));
        }
    }
}
