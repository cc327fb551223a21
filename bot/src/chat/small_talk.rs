//! A mention that is plainly not a request for work: thanks, a greeting,
//! a bare question, or something that sounds like a decision. Without a
//! language backend Eagle cannot answer these in words, but it must not
//! capture them as tasks ("@Eagle thanks!" is not task #7), and a decision
//! is taken only as a command, never from prose.
//!
//! Deliberately conservative: anything not recognised here is captured as
//! before; `!queue` captures without any judgement.

/// What a mention plainly is, when it is not work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmallTalk {
    /// "thanks", "great, thank you!", "спасибо".
    Thanks,
    /// "hi", "good morning", "привет".
    Greeting,
    /// "what is run 2 waiting on?": a question about the work.
    Question,
    /// "approve it", "yes merge run 1", "deny": a decision in prose, with
    /// the run it names, if any.
    Decision { run: Option<i64> },
}

const THANKS: &[&str] = &[
    "thanks",
    "thank you",
    "thank u",
    "thx",
    "ty",
    "cheers",
    "great",
    "nice",
    "cool",
    "perfect",
    "awesome",
    "ok",
    "okay",
    "good job",
    "well done",
    "спасибо",
    "благодарю",
    "отлично",
    "супер",
];

const GREETINGS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "good morning",
    "good afternoon",
    "good evening",
    "morning",
    "привет",
    "здравствуй",
    "здравствуйте",
    "доброе утро",
    "добрый день",
];

/// Words that open a question about the state of things (not "can you …",
/// which is a request).
const QUESTION_WORDS: &[&str] = &[
    "what",
    "whats",
    "what's",
    "why",
    "how",
    "when",
    "where",
    "who",
    "which",
    "is",
    "are",
    "was",
    "were",
    "did",
    "does",
    "do",
    "has",
    "have",
    "any",
    "что",
    "почему",
    "как",
    "когда",
    "где",
    "кто",
    "какой",
    "какие",
    "сколько",
];

/// Words that decide: in prose they decide nothing.
const DECISION_WORDS: &[&str] = &[
    "approve", "approved", "deny", "denied", "merge", "reject", "lgtm", "go", "ship",
];

/// What `text` (the mention's text, the mention itself removed) plainly
/// is, or `None` when it may be work.
pub fn classify(text: &str) -> Option<SmallTalk> {
    let folded = fold(text);
    if folded.is_empty() {
        return None;
    }
    let words: Vec<&str> = folded.split(' ').collect();
    // A decision first: "yes, merge it" is neither thanks nor work.
    if words.len() <= 6
        && words.iter().any(|w| DECISION_WORDS.contains(w))
        && words.iter().all(|w| decision_filler(w))
    {
        let run = words
            .iter()
            .filter_map(|w| w.strip_prefix('#').unwrap_or(w).parse::<i64>().ok())
            .next();
        return Some(SmallTalk::Decision { run });
    }
    let phrase_of = |list: &[&str]| {
        // The whole message is made of such phrases ("hi, thanks!").
        let mut rest = folded.as_str();
        while !rest.is_empty() {
            let found = list.iter().find(|p| {
                rest.strip_prefix(**p)
                    .is_some_and(|after| after.is_empty() || after.starts_with(' '))
            });
            let Some(p) = found else { return false };
            rest = rest[p.len()..].trim_start();
            for filler in [
                "so much",
                "a lot",
                "very much",
                "eagle",
                "all",
                "again",
                "and",
            ] {
                if let Some(after) = rest.strip_prefix(filler)
                    && (after.is_empty() || after.starts_with(' '))
                {
                    rest = after.trim_start();
                }
            }
        }
        true
    };
    if phrase_of(THANKS) {
        return Some(SmallTalk::Thanks);
    }
    let starts_greeting = GREETINGS.iter().any(|g| {
        folded
            .strip_prefix(*g)
            .is_some_and(|after| after.is_empty() || after.starts_with(' '))
    });
    if starts_greeting && phrase_of(&[GREETINGS, THANKS].concat()) {
        return Some(SmallTalk::Greeting);
    }
    let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if first_line.trim_end().ends_with('?')
        && words.first().is_some_and(|w| QUESTION_WORDS.contains(w))
    {
        return Some(SmallTalk::Question);
    }
    None
}

/// The words a decision in prose is made of.
fn decision_filler(word: &str) -> bool {
    const FILLER: &[&str] = &[
        "yes", "yeah", "yep", "ok", "okay", "sure", "please", "it", "this", "that", "run", "pr",
        "request", "req", "now", "the", "and", "do", "go", "ahead", "pls",
    ];
    DECISION_WORDS.contains(&word)
        || FILLER.contains(&word)
        || word
            .strip_prefix('#')
            .unwrap_or(word)
            .chars()
            .all(|c| c.is_ascii_digit())
}

/// Lower case, punctuation and emoji dropped, one space between words.
fn fold(text: &str) -> String {
    let lowered: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '#' || c == '\'' {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect();
    lowered.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Eagle's answer to small talk, without a language backend: never a task,
/// never a decision; the command that does what was meant.
pub fn answer(talk: &SmallTalk) -> String {
    match talk {
        SmallTalk::Thanks => "You're welcome. (Nothing was queued; `!queue <title>` puts a task into the inbox.)".into(),
        SmallTalk::Greeting => "Hello. `!status` shows what the workers are doing, `!help` lists what else I do; `!queue <title>` puts a task into the inbox.".into(),
        SmallTalk::Question => "I answer questions about the work with commands: `!status` (everything), `!status run <N>` (a run, what it waits on, its requests), `!status <task>`, `!why <task|run>`. Nothing was queued.".into(),
        SmallTalk::Decision { run } => {
            let (approve, deny, status) = match run {
                Some(run) => (
                    format!("`!approve {run} <request>`"),
                    format!("`!deny {run} <request> <reason>`"),
                    format!("`!status run {run}` lists its requests and their ids"),
                ),
                None => (
                    "`!approve <run> <request>`".to_string(),
                    "`!deny <run> <request> <reason>`".to_string(),
                    "`!status` shows what waits on you".to_string(),
                ),
            };
            format!(
                "I take decisions only as commands, so nothing was approved or queued: {approve} approves, {deny} denies; {status}."
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thanks_and_greetings_are_not_work() {
        for text in [
            "thanks!",
            "Thank you so much 🙏",
            "great, thanks",
            "спасибо!",
            "ok",
            "thx eagle",
        ] {
            assert_eq!(classify(text), Some(SmallTalk::Thanks), "{text}");
        }
        for text in ["hi", "Hello!", "good morning", "привет", "hey, thanks"] {
            assert_eq!(classify(text), Some(SmallTalk::Greeting), "{text}");
        }
    }

    #[test]
    fn a_bare_question_is_a_question_and_a_request_is_work() {
        assert_eq!(
            classify("what is run 2 waiting on?"),
            Some(SmallTalk::Question)
        );
        assert_eq!(
            classify("Why did the workers stop?"),
            Some(SmallTalk::Question)
        );
        for work in [
            "please fix the login crash on Safari",
            "can you fix the login crash on Safari?",
            "Fix the tab preview",
            "thanks to the new API the export is slow: make it fast",
            "hi-dpi icons are blurry",
            "Tabs mode:pr",
        ] {
            assert_eq!(classify(work), None, "{work}");
        }
    }

    #[test]
    fn a_decision_in_prose_decides_nothing_and_names_its_run() {
        assert_eq!(
            classify("approve it"),
            Some(SmallTalk::Decision { run: None })
        );
        assert_eq!(
            classify("yes merge run 1"),
            Some(SmallTalk::Decision { run: Some(1) })
        );
        assert_eq!(
            classify("LGTM, go ahead"),
            Some(SmallTalk::Decision { run: None })
        );
        assert_eq!(classify("merge the two settings pages into one"), None);
        let text = answer(&SmallTalk::Decision { run: Some(1) });
        assert!(text.contains("`!approve 1 <request>`"), "{text}");
        assert!(text.contains("nothing was approved"), "{text}");
    }
}
