//! `default-filter`: which tasks the analyzer takes, from the owner's notes.
//!
//! A task is skipped if any of these holds:
//! * its source is never taken (`skip_sources`, default `user_feedback_raw`),
//!   or is not a qualifying source (`sources`);
//! * it is not for the configured platform (`platform`, default `macos`),
//!   judged from the task's `platform` field and its tags, never from its text.
//!   A task with no platform information at all is kept only when it came
//!   from chat, where a person asked for it directly;
//! * its description contains every `template_markers` entry (default
//!   `Timeline` and `Project Advisor:`): a project template, not a task;
//! * it links to a design file (`link_patterns`, default `figma.com`)
//!   anywhere in it: its links, or a link in its title, description or notes
//!   (a word with `://`, one that starts with `www.`, or one that starts
//!   with a pattern and a `/`);
//! * it is closed, or assigned to someone other than the `owner`.
//!
//! Otherwise it votes keep. Configuration keys are all optional.
//!
//! `owner` is a string or a list of strings. An assignee written with an
//! address, `Name <address>` (Eagle records an Asana assignee as
//! `Bob <asana:1202>`, and the token's own user as `Alex <asana:me>`), is
//! the owner only when its address is one of them, never by its name; any
//! other assignee when it is one of them. Eagle sets `owner = "asana:me"`
//! (the Asana token's user, by gid) when the profile names none.

use eagle_policy_sdk::{Config, FilterVerdict, Metadata, Policy, Task, TaskState, export_policy};

const DEFAULT_PLATFORM: &str = "macos";
const DEFAULT_SOURCES: &[&str] = &[
    "O-L Backlog (Desktop Browsers)",
    "user_reports",
    "watched",
    "hack_days",
    "my_tasks_inbox",
    "my_tasks_backlog",
    "chat",
];
const DEFAULT_SKIP_SOURCES: &[&str] = &["user_feedback_raw"];
const DEFAULT_TEMPLATE_MARKERS: &[&str] = &["Timeline", "Project Advisor:"];
const DEFAULT_LINK_PATTERNS: &[&str] = &["figma.com"];

struct DefaultFilter;

impl Policy for DefaultFilter {
    fn metadata() -> Metadata {
        Metadata::new(
            "default-filter",
            env!("CARGO_PKG_VERSION"),
            "skips tasks for other platforms, project templates, design links, closed or others' tasks and unqualified sources",
        )
        .filtering()
    }

    fn filter(config: &Config, task: &Task) -> FilterVerdict {
        let settings = Settings::from(config);
        match settings.reason_to_skip(task) {
            Some(reason) => FilterVerdict::Skip(reason),
            None => FilterVerdict::Keep,
        }
    }
}

struct Settings {
    platform: String,
    owner: Vec<String>,
    sources: Vec<String>,
    skip_sources: Vec<String>,
    template_markers: Vec<String>,
    link_patterns: Vec<String>,
}

fn owned(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn same(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

impl From<&Config> for Settings {
    fn from(config: &Config) -> Settings {
        Settings {
            platform: config
                .str("platform")
                .filter(|p| !p.trim().is_empty())
                .unwrap_or(DEFAULT_PLATFORM)
                .to_string(),
            owner: config
                .strings("owner")
                .unwrap_or_default()
                .into_iter()
                .filter(|o| !o.trim().is_empty())
                .collect(),
            sources: config
                .strings("sources")
                .unwrap_or_else(|| owned(DEFAULT_SOURCES)),
            skip_sources: config
                .strings("skip_sources")
                .unwrap_or_else(|| owned(DEFAULT_SKIP_SOURCES)),
            template_markers: config
                .strings("template_markers")
                .unwrap_or_else(|| owned(DEFAULT_TEMPLATE_MARKERS)),
            link_patterns: config
                .strings("link_patterns")
                .unwrap_or_else(|| owned(DEFAULT_LINK_PATTERNS)),
        }
    }
}

impl Settings {
    fn reason_to_skip(&self, task: &Task) -> Option<String> {
        if self.skip_sources.iter().any(|s| same(s, &task.source)) {
            return Some(format!("source {} is never taken", task.source));
        }
        if !self.sources.iter().any(|s| same(s, &task.source)) {
            return Some(format!("source {} is not a qualifying source", task.source));
        }
        if let Some(reason) = self.wrong_platform(task) {
            return Some(reason);
        }
        if !self.template_markers.is_empty()
            && self
                .template_markers
                .iter()
                .all(|marker| task.description.contains(marker.as_str()))
        {
            return Some(format!(
                "a project template (the description has {})",
                self.template_markers.join(" and ")
            ));
        }
        if let Some(link) = self.design_link(task) {
            return Some(format!("links to a design file ({link})"));
        }
        if task.state == TaskState::Closed {
            return Some("the task is closed".into());
        }
        if let Some(assignee) = task.assignee.as_deref().filter(|a| !a.trim().is_empty()) {
            let (name, address) = split_assignee(assignee);
            let id = address.unwrap_or(assignee);
            if !self.owner.iter().any(|owner| same(owner, id)) {
                return Some(format!("assigned to {name}, not to the owner"));
            }
        }
        None
    }

    fn wrong_platform(&self, task: &Task) -> Option<String> {
        let tagged = task.tags.iter().any(|tag| same(tag, &self.platform));
        match task.platform.as_deref().filter(|p| !p.trim().is_empty()) {
            Some(platform) if same(platform, &self.platform) => None,
            Some(platform) if !tagged => {
                Some(format!("for {platform}, not a {} task", self.platform))
            }
            Some(_) => None,
            None if tagged || same(&task.source, "chat") => None,
            None => Some(format!(
                "not a {} task: neither its platform nor its tags say so",
                self.platform
            )),
        }
    }

    fn design_link(&self, task: &Task) -> Option<String> {
        let words = task
            .title
            .split_whitespace()
            .chain(task.description.split_whitespace())
            .chain(task.notes.split_whitespace())
            .filter(|w| self.looks_like_a_link(w));
        task.links
            .iter()
            .map(String::as_str)
            .chain(words)
            .find(|link| {
                let link = link.to_lowercase();
                self.link_patterns
                    .iter()
                    .any(|p| link.contains(&p.to_lowercase()))
            })
            .map(|link| {
                link.trim_matches(|c: char| "()<>[],.\"'".contains(c))
                    .to_string()
            })
    }

    /// A word of free text that is a link: a URL with a scheme, a
    /// `www.` address, or a bare `figma.com/…` (a pattern, then a path).
    fn looks_like_a_link(&self, word: &str) -> bool {
        let word = word
            .trim_start_matches(|c: char| "(<[\"'".contains(c))
            .to_lowercase();
        word.contains("://")
            || word.starts_with("www.")
            || self
                .link_patterns
                .iter()
                .any(|p| word.starts_with(&format!("{}/", p.to_lowercase())))
    }
}

/// `Name <address>` as its name and address; anything else is its own
/// name, with no address.
fn split_assignee(assignee: &str) -> (&str, Option<&str>) {
    let trimmed = assignee.trim();
    let split = trimmed
        .strip_suffix('>')
        .and_then(|rest| rest.rsplit_once('<'))
        .filter(|(_, address)| !address.trim().is_empty());
    match split {
        Some((name, address)) if name.trim().is_empty() => (address.trim(), Some(address.trim())),
        Some((name, address)) => (name.trim(), Some(address.trim())),
        None => (trimmed, None),
    }
}

export_policy!(DefaultFilter);
