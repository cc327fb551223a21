//! `!show <run> <request> [part]`: a request in full, for an approver.
//!
//! An approval binds to the request's exact bytes, so an approver must be
//! able to read every one of them: the body is shown whole, in parts that
//! each fit one chat message (the chat layer's own split drops whitespace
//! at its cuts, so it never cuts a request), with its size, whether it ends
//! with a line break, its parameter hash, and what Eagle will do if it is
//! approved (`crate::policy::effect`). Code points that would not show
//! (control and format characters, bidirectional controls, tag
//! characters, variation selectors: [`crate::ground::text::is_invisible`])
//! are written as their code point, `<U+202E>`. A private
//! task's request is shown only where `!status` would show the task.

use super::parse::id;
use super::status::visible;
use super::{Access, ChatCommand, CommandContext, CommandReply, CommandSpec, Handler, ParseError};
use crate::ground::text::escape_invisible;
use crate::store::StoreError;

/// Room kept in each part for the header, the part line and the fences.
const PART_MARGIN: usize = 200;
/// The smallest part, whatever the server's message limit.
const MIN_PART: usize = 500;

/// `!show <run id> <request id> [part]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Show {
    pub run: i64,
    pub request: i64,
    /// Which part of a long request (1 first).
    pub part: usize,
}

impl ChatCommand for Show {
    const SPEC: CommandSpec = CommandSpec {
        name: "show",
        args: "<run id> <request id> [part]",
        summary: "show a worker's request in full, and what Eagle will do if it is approved",
        details: "`!show 42 7` shows request 7 of run 42 exactly as the worker made it: every \
                  character (invisible ones written as their code point, `<U+202E>`), its size \
                  and hash, and what approving it makes Eagle do. A long request comes in parts: \
                  `!show 42 7 2` is the second. A private task's request is shown only where the \
                  task is.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        let words: Vec<&str> = args.split_whitespace().collect();
        let usage = |m: String| ParseError::usage(&Self::SPEC, m);
        let (run, request, part) = match words.as_slice() {
            [run, request] => (run, request, None),
            [run, request, part] => (run, request, Some(part)),
            _ => {
                return Err(usage(
                    "`!show` needs a run id and a request id: `!show 42 7`.".into(),
                ));
            }
        };
        let part = match part {
            None => 1,
            Some(word) => word
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| usage(format!("{word:?} is not a part number (1, 2, …).")))?,
        };
        Ok(Show {
            run: id(run, "run").map_err(usage)?,
            request: id(request, "request").map_err(usage)?,
            part,
        })
    }
}

impl Handler for Show {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        let run = match cx.run_or_refuse(self.run).await? {
            Ok(run) => run,
            Err(reply) => return Ok(reply),
        };
        let Some(request) = cx
            .tx
            .requests()
            .request(self.request)
            .await?
            .filter(|r| r.run_id == run.id)
        else {
            return Ok(CommandReply::refused(format!(
                "Run {} has no request {}. `!status run {}` lists its requests.",
                run.id, self.request, run.id
            )));
        };
        let task = cx.tx.tasks().task_by_gid(&run.task_gid).await?;
        if let Some(task) = &task
            && !visible(task, cx.message, cx.sender_is_approver())
        {
            return Ok(CommandReply::refused(format!(
                "Request {} of run {} belongs to a private task: `!show` shows it only in the \
                 task's own conversation (or in an approver's direct messages).",
                request.id, run.id
            )));
        }
        let body = request.body.as_str();
        let (shown, hidden) = escape_invisible(body);
        let effect = crate::policy::effect::describe_for(
            &request,
            &run,
            false,
            cx.profile.github.as_ref().is_some_and(|g| g.keep_drafts),
        )
        .map(|what| format!("{what}\n"))
        .unwrap_or_default();
        let mut header = format!(
            "**Request {id} of run {run}**: [{tag}: {action}] ({status}), {bytes} bytes, {chars} \
             characters, {lines} lines, {end}, hash `{hash}`{hidden}\n{effect}",
            id = request.id,
            run = run.id,
            tag = request.tag(),
            action = request.action,
            status = request.status.as_str(),
            bytes = body.len(),
            chars = body.chars().count(),
            lines = body.lines().count(),
            end = if body.ends_with('\n') {
                "ending with a line break"
            } else {
                "no line break at the end"
            },
            hash = &request.params_hash[..request.params_hash.len().min(16)],
            hidden = if hidden > 0 {
                format!(", {hidden} invisible character(s) written as `<U+…>`")
            } else {
                String::new()
            },
        );
        if shown.is_empty() {
            header.push_str("(its text is empty)");
            return Ok(CommandReply::ok(header));
        }
        let fence = "`".repeat(longest_backtick_run(&shown).max(2) + 1);
        let room = cx
            .max_message_chars
            .saturating_sub(header.chars().count() + 2 * fence.len() + PART_MARGIN)
            .max(MIN_PART);
        let parts = split_exact(&shown, room);
        let Some(part) = parts.get(self.part - 1) else {
            return Ok(CommandReply::refused(format!(
                "Request {} of run {} has {} part(s); there is no part {}.",
                request.id,
                run.id,
                parts.len(),
                self.part
            )));
        };
        if parts.len() > 1 {
            let next = if self.part < parts.len() {
                format!(
                    "; `!show {} {} {}` for the next",
                    run.id,
                    request.id,
                    self.part + 1
                )
            } else {
                String::new()
            };
            header.push_str(&format!("part {} of {}{next}\n", self.part, parts.len()));
        }
        Ok(CommandReply::ok(format!(
            "{header}{fence}text\n{part}\n{fence}"
        )))
    }
}

fn longest_backtick_run(text: &str) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// Cuts `text` into parts of at most `room` characters, counting an `@`
/// twice (the chat layer makes mentions inert by adding a character), so
/// that joined again they are exactly the text.
fn split_exact(text: &str, room: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut used = 0;
    for (at, c) in text.char_indices() {
        let cost = if c == '@' { 2 } else { 1 };
        if used > 0 && used + cost > room {
            parts.push(&text[start..at]);
            start = at;
            used = 0;
        }
        used += cost;
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_join_back_to_the_text() {
        let text = "ab@cd\nef".repeat(50);
        for room in [1, 2, 7, 100, 1_000] {
            let parts = split_exact(&text, room);
            assert_eq!(parts.concat(), text, "room {room}");
            assert!(
                parts.iter().all(|p| p
                    .chars()
                    .map(|c| if c == '@' { 2 } else { 1 })
                    .sum::<usize>()
                    <= room.max(2)),
                "room {room}"
            );
        }
        assert_eq!(split_exact("abc", 10), vec!["abc"]);
    }

    #[test]
    fn the_longest_run_of_backticks() {
        assert_eq!(longest_backtick_run("a ```` b ``"), 4);
    }

    #[test]
    fn parse() {
        assert_eq!(
            Show::parse("42 7", &[]).unwrap(),
            Show {
                run: 42,
                request: 7,
                part: 1
            }
        );
        assert_eq!(Show::parse("run:42 req:7 3", &[]).unwrap().part, 3);
        for bad in ["", "42", "42 x", "42 7 0", "42 7 1 2"] {
            assert!(Show::parse(bad, &[]).is_err(), "{bad:?}");
        }
    }
}
