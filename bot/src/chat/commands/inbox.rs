//! The commands anyone may use: `!help`, `!queue`, `!status` and `!why`.
//!
//! Their answers are read from the store (rendered in [`super::status`]);
//! `!queue` with a title captures a task into the inbox, as a mention of
//! the bot does.

use super::MAX_TITLE_CHARS;
use super::parse::id;
use super::status;
use super::{
    Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError, SPECS,
    spec,
};
use crate::chat::message::{InboundMessage, Place};
use crate::store::{NewAuditEntry, NewTask, Origin, StoreError, Tx};

/// `!help [command]`: the command list, or one command explained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Help {
    pub command: Option<&'static str>,
}

impl ChatCommand for Help {
    const SPEC: CommandSpec = CommandSpec {
        name: "help",
        args: "[command]",
        summary: "list the commands, or explain one",
        details: "`!help` lists every command; `!help queue` explains `!queue`.",
        access: Access::Anyone,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        match words.as_slice() {
            [] => Ok(Help { command: None }),
            [name] => {
                let name = name.trim_start_matches('!');
                match spec(name) {
                    Some(found) => Ok(Help {
                        command: Some(found.name),
                    }),
                    None => Err(ParseError::usage(
                        &Self::SPEC,
                        format!("There is no command `!{name}`."),
                    )),
                }
            }
            _ => Err(ParseError::usage(
                &Self::SPEC,
                "`!help` takes at most one command name.",
            )),
        }
    }
}

impl Handler for Help {
    async fn handle(&self, _cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        Ok(CommandReply::ok(help_text(self.command)))
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

/// `!queue [--repo NAME] [title]`: captures a task, or lists the open inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    /// `None` for a bare `!queue` (list the inbox).
    pub title: Option<String>,
    pub description: String,
    /// `--repo NAME`: the repository the task belongs to.
    pub repo: Option<String>,
}

impl ChatCommand for Queue {
    const SPEC: CommandSpec = CommandSpec {
        name: "queue",
        args: "[--repo NAME] [title]",
        summary: "put a task into the inbox, or list the open inbox",
        details: "`!queue Fix the tab preview` captures a task with that title; the following lines \
                  of the message become its description. Eagle answers with the task's id. \
                  `!queue --repo web Fix the tab preview` puts it in the repository named `web` \
                  (without `--repo`: the executor's first). `!queue` alone lists the open tasks.",
        access: Access::Anyone,
    };

    fn parse(args: &str, body: &[&str]) -> Result<Self, ParseError> {
        let (repo, args) = match args.trim_start().strip_prefix("--repo") {
            Some(rest) if rest.is_empty() || rest.starts_with([' ', '=']) => {
                let rest = rest.trim_start_matches([' ', '=']);
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                let name = &rest[..end];
                if !crate::ground::repo::is_checkout_name(name) {
                    return Err(ParseError::usage(
                        &Self::SPEC,
                        format!(
                            "`--repo` takes a repository's name (letters, digits, `-`, `_`), \
                             not {:?}: `!queue --repo web Fix the tab preview`",
                            crate::ground::text::one_line(name, 60)
                        ),
                    ));
                }
                (Some(name.to_string()), &rest[end..])
            }
            _ => (None, args),
        };
        // Trim blank lines around the description, keep everything in between.
        let first = body.iter().position(|l| !l.trim().is_empty());
        let last = body.iter().rposition(|l| !l.trim().is_empty());
        let mut description: Vec<&str> = match (first, last) {
            (Some(first), Some(last)) => body[first..=last].to_vec(),
            _ => Vec::new(),
        };
        let mut title = args.trim().to_string();
        if title.is_empty() {
            if description.is_empty() {
                if repo.is_some() {
                    return Err(ParseError::usage(
                        &Self::SPEC,
                        "`!queue --repo NAME` needs a title: `!queue --repo web Fix the tab preview`",
                    ));
                }
                return Ok(Queue {
                    title: None,
                    description: String::new(),
                    repo: None,
                });
            }
            title = description.remove(0).trim().to_string();
        }
        let mut description = description.join("\n");
        if title.chars().count() > MAX_TITLE_CHARS {
            // Nothing is lost: the whole line leads the description.
            let cut: String = title.chars().take(MAX_TITLE_CHARS).collect();
            let cut = match cut.rfind(' ') {
                Some(space) if space > MAX_TITLE_CHARS / 2 => cut[..space].to_string(),
                _ => cut,
            };
            description = if description.is_empty() {
                title.clone()
            } else {
                format!("{title}\n\n{description}")
            };
            title = format!("{cut}…");
        }
        Ok(Queue {
            title: Some(title),
            description,
            repo,
        })
    }
}

impl Handler for Queue {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        match &self.title {
            None => {
                let approver = cx.sender_is_approver();
                status::overview(cx.tx, cx.message, approver, 1, false).await
            }
            Some(title) => {
                let ordinal = cx.next_queued();
                if let Some(repo) = &self.repo {
                    let known = cx.tx.repos().names().await?;
                    if !known.is_empty() && !known.iter().any(|k| k == repo) {
                        return Ok(CommandReply::refused(format!(
                            "There is no repository named {repo}: the executors work in {}. \
                             Nothing was queued.",
                            known.join(", ")
                        )));
                    }
                }
                let task = NewQueued {
                    title,
                    description: &self.description,
                    repo: self.repo.as_deref(),
                };
                queue(cx.tx, cx.message, &task, ordinal).await
            }
        }
    }
}

/// The task id a captured message gets: `zulip:<message id>`, with `#n` for
/// the second and later `!queue` lines of one message.
pub fn task_gid(message: &InboundMessage, ordinal: usize) -> String {
    let base = format!("{}:{}", message.transport, message.message_id);
    if ordinal <= 1 {
        base
    } else {
        format!("{base}#{ordinal}")
    }
}

/// Captures a task into the inbox (from `!queue` or an @-mention).
/// What `!queue` (or a confirmed proposal) captures.
pub struct NewQueued<'a> {
    pub title: &'a str,
    pub description: &'a str,
    pub repo: Option<&'a str>,
}

pub async fn queue(
    tx: &mut Tx,
    message: &InboundMessage,
    task: &NewQueued<'_>,
    ordinal: usize,
) -> Result<CommandReply, StoreError> {
    let NewQueued {
        title,
        description,
        repo,
    } = *task;
    let (channel, topic) = match &message.place {
        Place::Channel { channel, topic } => (Some(channel.clone()), Some(topic.clone())),
        Place::Direct { .. } => (None, None),
    };
    let gid = task_gid(message, ordinal);
    let new = NewTask {
        task_gid: gid.clone(),
        source: "chat".into(),
        title: title.to_string(),
        description: description.to_string(),
        requested_by: Some(message.sender.full_name.clone()),
        requested_by_id: Some(message.sender.user_id),
        requested_by_email: Some(message.sender.email.clone()),
        origin: Origin {
            transport: message.transport.to_string(),
            channel,
            topic,
            message_id: Some(message.message_id),
            private: message.private,
        },
        repo: repo.map(str::to_string),
    };
    match tx.tasks().insert_task(&new).await? {
        Some(id) => {
            tx.audit_log()
                .audit(&NewAuditEntry {
                    actor: message.sender_actor(),
                    action: "task.queued".into(),
                    subject: format!("task:{id}"),
                    reason: Some(format!("captured from {}", message.place)),
                    source_message_id: Some(message.message_id),
                    ..NewAuditEntry::default()
                })
                .await?;
            let place = repo.map(|r| format!(" (in {r})")).unwrap_or_default();
            Ok(CommandReply::ok(format!(
                "Queued task #{id}{place}: {title}"
            )))
        }
        None => {
            let existing = tx.tasks().task_by_gid(&gid).await?;
            let id = existing.map(|t| t.id).unwrap_or_default();
            Ok(CommandReply::ok(format!(
                "This message was queued already as task #{id}."
            )))
        }
    }
}

/// What `!status` is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusQuery {
    /// A bare `!status`: the run of the topic it was typed in, elsewhere
    /// the overview's first page.
    Here,
    /// Counts and the open tasks and runs, one page of them.
    Overview {
        page: u32,
    },
    Task(i64),
    Run(i64),
}

/// `!status [task id | run <run id> | page <n>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status(pub StatusQuery);

impl ChatCommand for Status {
    const SPEC: CommandSpec = CommandSpec {
        name: "status",
        args: "[task id | run <run id> | page <n>]",
        summary: "show what is queued and running",
        details: "`!status` counts tasks by status and runs by state, and lists the open ones \
                  (`!status page 2` shows more). `!status 12` shows task 12 with its runs; \
                  `!status run 42` shows run 42 with what its worker said last; in a run's own topic \
                  a bare `!status` shows that run.",
        access: Access::Anyone,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let query = match words.as_slice() {
            [] => Ok(StatusQuery::Here),
            ["page", n] => n
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .map(|page| StatusQuery::Overview { page })
                .ok_or_else(|| format!("{n:?} is not a page number.")),
            ["run", run] => id(run, "run").map(StatusQuery::Run),
            ["task", task] => id(task, "task").map(StatusQuery::Task),
            [one] if one.starts_with("run:") => id(one, "run").map(StatusQuery::Run),
            [task] => id(task, "task").map(StatusQuery::Task),
            _ => Err("`!status` takes a task id, `run <run id>` or `page <n>`.".into()),
        };
        query
            .map(Status)
            .map_err(|m| ParseError::usage(&Self::SPEC, m))
    }
}

impl Handler for Status {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let approver = cx.sender_is_approver();
        match self.0 {
            StatusQuery::Here => match cx.topic_run().await? {
                Some(run) => status::run_status(cx.tx, cx.message, approver, run.id).await,
                None => status::overview(cx.tx, cx.message, approver, 1, true).await,
            },
            StatusQuery::Overview { page } => {
                status::overview(cx.tx, cx.message, approver, page, true).await
            }
            StatusQuery::Task(id) => status::task_status(cx.tx, cx.message, approver, id).await,
            StatusQuery::Run(id) => status::run_status(cx.tx, cx.message, approver, id).await,
        }
    }
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

/// `!why task <id> | run <id> | request <id>`: an audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why(pub WhyTarget);

impl ChatCommand for Why {
    const SPEC: CommandSpec = CommandSpec {
        name: "why",
        args: "task <id> | run <id> | request <id>",
        summary: "show the audit trail of a task, run or request",
        details: "`!why task 12` lists who or what decided what about task 12, when, and why, \
                  including the policy plugin, its version and content hash.",
        access: Access::Anyone,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let target = match words.as_slice() {
            ["task", n] => id(n, "task").map(WhyTarget::Task),
            ["run", n] => id(n, "run").map(WhyTarget::Run),
            ["request" | "req", n] => id(n, "request").map(WhyTarget::Request),
            [one] if one.starts_with("run:") => id(one, "run").map(WhyTarget::Run),
            [one] if one.starts_with("req:") => id(one, "request").map(WhyTarget::Request),
            _ => Err("`!why` takes `task <id>`, `run <id>` or `request <id>`.".into()),
        };
        target
            .map(Why)
            .map_err(|m| ParseError::usage(&Self::SPEC, m))
    }
}

impl Handler for Why {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let approver = cx.sender_is_approver();
        status::why(cx.tx, cx.message, approver, self.0).await
    }
}
