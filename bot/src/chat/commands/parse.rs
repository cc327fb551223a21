//! The command parser: message text in, commands out. Pure: no IO, no panics,
//! every input gives commands or parse errors that show the usage.
//!
//! This finds the command lines of a message (outside fences and quotes,
//! also after a leading mention of the bot) and hands each to its
//! command's own parser ([`super::ChatCommand::parse`]), through the
//! command set's dispatch; the small readers those parsers share (ids, no
//! arguments) are here too.

use std::fmt;

use super::{Command, CommandSet, CommandSpec};

/// How the bot is named in mentions: `@**Full Name**`, `@**Full Name|id**`, `@**|id**`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotNames {
    pub full_name: String,
    pub user_id: Option<i64>,
}

/// One command line of a message, parsed (into a command of Eagle's set,
/// unless told otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation<C = Command> {
    /// The command line as written (without a leading mention), for the reply.
    pub line: String,
    pub result: Result<C, ParseError>,
}

/// A command line that could not be understood, with the usage to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub message: String,
    pub usage: Option<String>,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(usage) = &self.usage {
            write!(f, "\nUsage: `{usage}`")?;
        }
        Ok(())
    }
}

impl ParseError {
    /// A mistake in a command line, shown with that command's usage.
    pub(super) fn usage(spec: &CommandSpec, message: impl Into<String>) -> Self {
        ParseError {
            message: message.into(),
            usage: Some(spec.usage()),
        }
    }
}

/// A fence opened by ``` or ~~~ and the length that closes it.
#[derive(Clone, Copy)]
struct Fence {
    marker: char,
    len: usize,
}

fn fence_of(line: &str) -> Option<Fence> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let marker = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = rest.chars().take_while(|c| *c == marker).count();
    (len >= 3).then_some(Fence { marker, len })
}

fn closes(fence: Fence, line: &str) -> bool {
    fence_of(line).is_some_and(|f| {
        let rest = line.trim().trim_start_matches(fence.marker);
        f.marker == fence.marker && f.len >= fence.len && rest.trim().is_empty()
    })
}

fn is_quote(line: &str) -> bool {
    line.trim_start().starts_with('>')
}

/// If `text` starts with an @-mention of the bot, returns what follows it.
pub fn strip_leading_mention<'a>(text: &'a str, bot: &BotNames) -> Option<&'a str> {
    let text = text.trim_start();
    let rest = text
        .strip_prefix("@_**")
        .or_else(|| text.strip_prefix("@**"))?;
    let end = rest.find("**")?;
    let inner = &rest[..end];
    let after = &rest[end + 2..];
    let (name, id) = match inner.rsplit_once('|') {
        Some((name, id)) => (name, Some(id)),
        None => (inner, None),
    };
    let matches = match id {
        // Zulip requires the name to fit the id when both are given.
        Some(id) => {
            let id_ok = id
                .parse::<i64>()
                .ok()
                .is_some_and(|id| Some(id) == bot.user_id);
            id_ok && (name.is_empty() || crate::ground::text::eq_fold(name, &bot.full_name))
        }
        None => crate::ground::text::eq_fold(name, &bot.full_name),
    };
    if !matches {
        return None;
    }
    let after = after.trim_start_matches([':', ',']);
    Some(after.trim_start())
}

/// Where `text` mentions the bot (loud or silent), as byte ranges that
/// include the separators after a mention. Zulip's rule applies: a mention
/// starts the text or follows whitespace or one of `'"({[/<`.
fn mention_spans<'a>(
    text: &'a str,
    bot: &'a BotNames,
) -> impl Iterator<Item = (usize, usize, bool)> + 'a {
    text.match_indices('@').filter_map(move |(at, _)| {
        let before = text[..at].chars().next_back();
        let boundary = before.is_none_or(|c| c.is_whitespace() || "'\"({[/<".contains(c));
        let candidate = &text[at..];
        let rest = strip_leading_mention(candidate, bot).filter(|_| boundary)?;
        let silent = candidate.starts_with("@_");
        Some((at, text.len() - rest.len(), silent))
    })
}

/// Whether `text` mentions the bot anywhere, not silently: the fallback for
/// deliveries that carry no `mentioned` flag.
pub fn mentions_bot(text: &str, bot: &BotNames) -> bool {
    mention_spans(text, bot).any(|(_, _, silent)| !silent)
}

/// `text` with every mention of the bot taken out (the rest of a captured task).
pub fn without_mentions(text: &str, bot: &BotNames) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (start, end, _) in mention_spans(text, bot) {
        if start >= from {
            out.push_str(&text[from..start]);
            from = end;
        }
    }
    out.push_str(&text[from..]);
    out
}

/// The command word and arguments of a command line, if it is one.
fn command_line<'a>(line: &'a str, bot: &BotNames) -> Option<(&'a str, &'a str, &'a str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let line = line.trim();
    let line = strip_leading_mention(line, bot).unwrap_or(line);
    let rest = line.strip_prefix('!')?;
    if !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let word_end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(rest.len());
    let word = &rest[..word_end];
    let args = rest[word_end..].trim();
    Some((line, word, args))
}

/// Finds and parses every command line of a message.
///
/// Lines inside code fences and quotes are never commands. The lines after a
/// `!queue` line, up to the next command line, are that task's description.
pub fn parse_message(text: &str, bot: &BotNames) -> Vec<Invocation> {
    parse_message_as::<Command>(text, bot)
}

/// [`parse_message`] for the commands of any set.
pub fn parse_message_as<C: CommandSet>(text: &str, bot: &BotNames) -> Vec<Invocation<C>> {
    struct Pending<'a> {
        line: &'a str,
        word: &'a str,
        args: &'a str,
        body: Vec<&'a str>,
    }
    let mut found: Vec<Pending<'_>> = Vec::new();
    let mut fence: Option<Fence> = None;
    for line in text.lines() {
        if let Some(open) = fence {
            if closes(open, line) {
                fence = None;
            }
            if let Some(last) = found.last_mut() {
                last.body.push(line);
            }
            continue;
        }
        if let Some(open) = fence_of(line) {
            fence = Some(open);
        } else if !is_quote(line)
            && let Some((line, word, args)) = command_line(line, bot)
        {
            found.push(Pending {
                line,
                word,
                args,
                body: Vec::new(),
            });
            continue;
        }
        if let Some(last) = found.last_mut() {
            last.body.push(line);
        }
    }
    found
        .into_iter()
        .map(|p| Invocation {
            line: p.line.to_string(),
            result: parse_command(p.word, p.args, &p.body),
        })
        .collect()
}

fn parse_command<C: CommandSet>(word: &str, args: &str, body: &[&str]) -> Result<C, ParseError> {
    C::parse(word, args, body).unwrap_or_else(|| {
        let hint = closest(C::SPECS, word)
            .map(|name| format!(" Did you mean `!{name}`?"))
            .unwrap_or_default();
        Err(ParseError {
            message: format!(
                "I don't know the command `!{word}`.{hint} `!help` lists the commands."
            ),
            usage: None,
        })
    })
}

/// Arguments of a command that takes none.
pub(super) fn no_args(spec: &CommandSpec, args: &str) -> Result<(), ParseError> {
    if args.split_whitespace().next().is_none() {
        Ok(())
    } else {
        Err(ParseError::usage(
            spec,
            format!("`!{}` takes no arguments.", spec.name),
        ))
    }
}

/// Arguments of a command that takes exactly one id of a `what`.
pub(super) fn one_id(spec: &CommandSpec, args: &str, what: &str) -> Result<i64, ParseError> {
    let words: Vec<&str> = args.split_whitespace().collect();
    match words.as_slice() {
        [one] => id(one, what).map_err(|m| ParseError::usage(spec, m)),
        [] => Err(ParseError::usage(
            spec,
            format!("`!{}` needs a {what} id.", spec.name),
        )),
        _ => Err(ParseError::usage(
            spec,
            format!("`!{}` takes one {what} id.", spec.name),
        )),
    }
}

/// Parses an id written as `42`, `#42`, `run:42` or `req:42`.
pub(super) fn id(word: &str, what: &str) -> Result<i64, String> {
    let digits = word
        .strip_prefix('#')
        .or_else(|| word.strip_prefix("run:"))
        .or_else(|| word.strip_prefix("req:"))
        .or_else(|| word.strip_prefix("task:"))
        .unwrap_or(word);
    digits
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{word:?} is not a {what} id (a positive number)."))
}

/// The command nearest to a mistyped word, if one is close.
fn closest(specs: &[CommandSpec], word: &str) -> Option<&'static str> {
    let word = word.to_ascii_lowercase();
    specs
        .iter()
        .map(|s| (edit_distance(&word, s.name), s.name))
        .filter(|(d, _)| *d <= (word.len() / 3).max(1))
        .min()
        .map(|(_, name)| name)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::commands::MAX_TITLE_CHARS;
    use crate::chat::commands::Queue;

    fn bot() -> BotNames {
        BotNames {
            full_name: "Eagle".into(),
            user_id: Some(7),
        }
    }

    /// Renders what a message parses to, one line per command.
    fn show(text: &str) -> String {
        parse_message(text, &bot())
            .iter()
            .map(|inv| match &inv.result {
                Ok(cmd) => format!("{cmd:?}"),
                Err(e) => format!("error: {}", e.to_string().replace('\n', " | ")),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn table() {
        let cases: &[(&str, &str)] = &[
            ("!help", "Help { command: None }"),
            ("!HELP queue", "Help { command: Some(\"queue\") }"),
            ("!help !status", "Help { command: Some(\"status\") }"),
            (
                "!help nope",
                "error: There is no command `!nope`. | Usage: `!help [command]`",
            ),
            (
                "!help a b",
                "error: `!help` takes at most one command name. | Usage: `!help [command]`",
            ),
            (
                "!queue",
                "Queue { title: None, description: \"\", repo: None }",
            ),
            (
                "!queue Fix the tab preview",
                "Queue { title: Some(\"Fix the tab preview\"), description: \"\", repo: None }",
            ),
            (
                "!queue Fix it\nIt hangs.\n\nOn macOS.\n",
                "Queue { title: Some(\"Fix it\"), description: \"It hangs.\\n\\nOn macOS.\", repo: None }",
            ),
            (
                "!queue\nTitle on next line\nbody",
                "Queue { title: Some(\"Title on next line\"), description: \"body\", repo: None }",
            ),
            (
                "!queue --repo web Fix it",
                "Queue { title: Some(\"Fix it\"), description: \"\", repo: Some(\"web\") }",
            ),
            (
                "!queue --repo ../etc Fix it",
                "error: `--repo` takes a repository's name (letters, digits, `-`, `_`), not \"../etc\": `!queue --repo web Fix the tab preview` | Usage: `!queue [--repo NAME] [title]`",
            ),
            (
                "!queue --repo web",
                "error: `!queue --repo NAME` needs a title: `!queue --repo web Fix the tab preview` | Usage: `!queue [--repo NAME] [title]`",
            ),
            ("!status", "Status(Here)"),
            ("!status 12", "Status(Task(12))"),
            ("!status #12", "Status(Task(12))"),
            ("!status task 12", "Status(Task(12))"),
            ("!status run 42", "Status(Run(42))"),
            ("!status run:42", "Status(Run(42))"),
            ("!status page 3", "Status(Overview { page: 3 })"),
            (
                "!status page 0",
                "error: \"0\" is not a page number. | Usage: `!status [task id | run <run id> | page <n>]`",
            ),
            (
                "!status abc",
                "error: \"abc\" is not a task id (a positive number). | Usage: `!status [task id | run <run id> | page <n>]`",
            ),
            (
                "!status -1",
                "error: \"-1\" is not a task id (a positive number). | Usage: `!status [task id | run <run id> | page <n>]`",
            ),
            (
                "!status 99999999999999999999",
                "error: \"99999999999999999999\" is not a task id (a positive number). | Usage: `!status [task id | run <run id> | page <n>]`",
            ),
            (
                "!status run",
                "error: \"run\" is not a task id (a positive number). | Usage: `!status [task id | run <run id> | page <n>]`",
            ),
            ("!why task 3", "Why(Task(3))"),
            ("!why req:7", "Why(Request(7))"),
            (
                "!why 3",
                "error: `!why` takes `task <id>`, `run <id>` or `request <id>`. | Usage: `!why task <id> | run <id> | request <id>`",
            ),
            (
                "!approve 42",
                "Approve { run: Some(42), request: None, note: None }",
            ),
            (
                "!approve run:42 req:7",
                "Approve { run: Some(42), request: Some(7), note: None }",
            ),
            (
                "!approve",
                "Approve { run: None, request: None, note: None }",
            ),
            (
                "!approve 42 7 squash it first",
                "Approve { run: Some(42), request: Some(7), note: Some(\"squash it first\") }",
            ),
            (
                "!approve 42 looks good",
                "Approve { run: Some(42), request: None, note: Some(\"looks good\") }",
            ),
            (
                "!approve x",
                "Approve { run: None, request: None, note: Some(\"x\") }",
            ),
            ("!hold 4", "Hold { target: Run(4) }"),
            ("!hold ALL", "Hold { target: All }"),
            ("!unhold all", "Unhold { target: All }"),
            (
                "!hold",
                "error: Say which run, or `all`. | Usage: `!hold <run id> | all`",
            ),
            (
                "!deny 42 too risky",
                "Deny { run: Some(42), request: None, reason: \"too risky\" }",
            ),
            (
                "!deny 42 7 too risky",
                "Deny { run: Some(42), request: Some(7), reason: \"too risky\" }",
            ),
            (
                "!deny 42",
                "error: `!deny` needs a reason for the worker. | Usage: `!deny [run id] [request id] <reason>`",
            ),
            (
                "!deny",
                "error: `!deny` needs a reason for the worker. | Usage: `!deny [run id] [request id] <reason>`",
            ),
            ("!go 12", "Go { task: 12, dry_run: false }"),
            ("!go 12 --dry-run", "Go { task: 12, dry_run: true }"),
            (
                "!go",
                "error: `!go` needs a task id. | Usage: `!go <task id> [--dry-run]`",
            ),
            (
                "!cancel 1 2",
                "error: `!cancel` takes one run id. | Usage: `!cancel <run id>`",
            ),
            ("!pause", "Pause"),
            ("!reanalyze", "Reanalyze { confirm: false }"),
            ("!reanalyze CONFIRM", "Reanalyze { confirm: true }"),
            (
                "!reanalyze all",
                "error: `!reanalyze` takes nothing, or `confirm`. | Usage: `!reanalyze [confirm]`",
            ),
            (
                "!pause now",
                "error: `!pause` takes no arguments. | Usage: `!pause`",
            ),
            (
                "!stauts",
                "error: I don't know the command `!stauts`. Did you mean `!status`? `!help` lists the commands.",
            ),
            (
                "!frobnicate",
                "error: I don't know the command `!frobnicate`. `!help` lists the commands.",
            ),
            // Not commands at all.
            ("hello", ""),
            ("! status", ""),
            ("!!", ""),
            ("!1", ""),
            ("say !status", ""),
            ("    !status", ""),
            ("", ""),
            // Mentions.
            ("@**Eagle** !status", "Status(Here)"),
            ("@**eagle**: !help", "Help { command: None }"),
            ("@**Eagle|7** !status 3", "Status(Task(3))"),
            ("@**|7** !status", "Status(Here)"),
            ("@_**Eagle** !status", "Status(Here)"),
            ("@**Eagle|8** !status", ""),
            ("@**Someone Else** !status", ""),
            // Fences and quotes.
            ("```\n!status\n```", ""),
            (
                "~~~~\n!status\n~~~\n!help\n~~~~\n!help",
                "Help { command: None }",
            ),
            ("```quote\n!status\n```\n!help", "Help { command: None }"),
            ("> !status", ""),
            ("  > !status", ""),
            ("```\n!status", ""),
            // Several commands in one message.
            ("!status\n!help", "Status(Here)\nHelp { command: None }"),
            (
                "!queue A\ndetail\n!queue B",
                "Queue { title: Some(\"A\"), description: \"detail\", repo: None }\nQueue { title: Some(\"B\"), description: \"\", repo: None }",
            ),
            (
                "!queue A\n```\n!status\n```",
                "Queue { title: Some(\"A\"), description: \"```\\n!status\\n```\", repo: None }",
            ),
        ];
        let mut failures = Vec::new();
        for (input, want) in cases {
            let got = show(input);
            if &got != want {
                failures.push(format!("input: {input:?}\n  want: {want}\n  got:  {got}"));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn mentions_anywhere() {
        let bot = bot();
        assert!(mentions_bot("hey @**Eagle** look", &bot));
        assert!(mentions_bot("(@**eagle|7**)", &bot));
        assert!(!mentions_bot("hey @_**Eagle** look", &bot));
        assert!(!mentions_bot("mail@**Eagle**", &bot));
        assert!(!mentions_bot("@**all** hello", &bot));
        assert!(!mentions_bot("@**Eagle|8**", &bot));
        assert_eq!(
            without_mentions("hey @**Eagle**: fix it", &bot),
            "hey fix it"
        );
        assert_eq!(
            without_mentions("@**Eagle** a @_**eagle|7** b", &bot),
            "a b"
        );
        assert_eq!(
            without_mentions("mail@**Eagle** stays", &bot),
            "mail@**Eagle** stays"
        );
    }

    #[test]
    fn long_titles_keep_everything() {
        let long = "word ".repeat(80);
        let parsed = parse_message(&format!("!queue {long}\nmore"), &bot());
        let Ok(Command::Queue(Queue {
            title: Some(title),
            description,
            ..
        })) = &parsed[0].result
        else {
            panic!("not a queue command: {parsed:?}");
        };
        assert!(title.chars().count() <= MAX_TITLE_CHARS + 1);
        assert!(title.ends_with('…'));
        assert!(description.starts_with(long.trim()));
        assert!(description.ends_with("more"));
    }

    #[test]
    fn never_panics_on_arbitrary_input() {
        let alphabet: Vec<char> = "!@*|_`~> \n\t#:0123456789abcdefghqstuvEagleрусский✓\u{200b}"
            .chars()
            .collect();
        let mut rng = fastrand::Rng::with_seed(0xEA61E);
        for _ in 0..20_000 {
            let len = rng.usize(0..60);
            let text: String = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect();
            let _ = parse_message(&text, &bot());
            let _ = strip_leading_mention(&text, &bot());
        }
        for word in [
            "!status", "!queue", "!help", "!approve", "!deny", "!why", "!go",
        ] {
            for suffix in [
                "", " ", " run", " run:", " #", " req:", " 1 2 3", " ж", " 🦅",
            ] {
                let _ = parse_message(&format!("{word}{suffix}"), &bot());
            }
        }
    }
}
