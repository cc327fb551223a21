//! The command set as a whole: `!help` pinned, every declared name reaches
//! its parser, and a command declared here, outside the product's list,
//! goes through the same parser, access check and handler as every other.

use std::collections::BTreeMap;

use super::*;
use crate::chat::message::{InboundMessage, Place, Sender};
use crate::profile::{DatabaseUrl, Profile};
use crate::runtime::posts::Poster;
use crate::store::Store;

fn bot() -> BotNames {
    BotNames {
        full_name: "Eagle".into(),
        user_id: Some(7),
    }
}

#[test]
fn help_is_pinned() {
    expect_test::expect_file!["snapshots/help.txt"].assert_eq(&help_text(None));
    expect_test::expect_file!["snapshots/help-queue.txt"].assert_eq(&help_text(Some("queue")));
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

#[test]
fn every_declared_name_reaches_its_parser() {
    for spec in SPECS {
        for line in [
            format!("!{}", spec.name),
            format!("!{}", spec.name.to_uppercase()),
        ] {
            let parsed = parse_message(&line, &bot());
            let [invocation] = parsed.as_slice() else {
                panic!("{line:?} is not one command line: {parsed:?}");
            };
            match &invocation.result {
                Ok(command) => assert_eq!(command.spec().name, spec.name, "{line:?}"),
                Err(error) => assert_eq!(
                    error.usage.as_deref(),
                    Some(spec.usage().as_str()),
                    "{line:?} is refused without its usage: {error}"
                ),
            }
        }
    }
}

/// A command declared only here: one type with its spec and parser, one
/// handler, one line in a list.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Echo {
    words: String,
}

impl ChatCommand for Echo {
    const SPEC: CommandSpec = CommandSpec {
        name: "echo",
        args: "<words>",
        summary: "say the words back",
        details: "`!echo hello` answers with who said hello.",
        access: Access::Approvers,
    };

    fn parse(args: &str, _body: &[&str]) -> Result<Self, ParseError> {
        if args.is_empty() {
            return Err(ParseError::usage(&Self::SPEC, "`!echo` needs words."));
        }
        Ok(Echo { words: args.into() })
    }
}

impl Handler for Echo {
    async fn handle(&self, cx: &mut CommandContext<'_, '_>) -> Result<CommandReply, StoreError> {
        Ok(CommandReply::ok(format!(
            "{} said {}",
            cx.who(),
            self.words
        )))
    }
}

commands! {
    /// A set beside Eagle's: one of its commands and the one declared here.
    enum Fixture { Go, Echo }
}

#[test]
fn a_new_command_is_parsed_through_the_generic_machinery() {
    let names: Vec<&str> = Fixture::SPECS.iter().map(|s| s.name).collect();
    assert_eq!(names, ["go", "echo"]);
    let shown: Vec<String> =
        parse_message_as::<Fixture>("!echo hello there\n!ECHO\n!go 3\n!help", &bot())
            .into_iter()
            .map(|inv| match inv.result {
                Ok(command) => format!("{command:?} ({})", command.spec().name),
                Err(error) => format!("error: {error}"),
            })
            .collect();
    assert_eq!(
        shown,
        [
            "Echo { words: \"hello there\" } (echo)",
            "error: `!echo` needs words.\nUsage: `!echo <words>`",
            "Go { task: 3, dry_run: false } (go)",
            "error: I don't know the command `!help`. `!help` lists the commands.",
        ]
    );
}

fn message(user_id: i64, is_bot: bool) -> InboundMessage {
    InboundMessage {
        identity: "eagle".into(),
        transport: "shell",
        message_id: 1,
        sender: Sender {
            user_id,
            email: format!("user{user_id}@example.com"),
            full_name: "Ann @**all**".into(),
            is_bot,
        },
        place: Place::Channel {
            channel: "shell".into(),
            topic: "t".into(),
        },
        content: String::new(),
        mentioned: false,
        private: false,
        timestamp: chrono::Utc::now(),
        late: false,
    }
}

#[tokio::test]
async fn a_new_command_is_executed_through_the_access_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("p.toml"),
        "role = \"orchestrator\"\ndata_dir = \".\"\napprovers = [5]\nowner = 5\n",
    )
    .expect("profile");
    let env = BTreeMap::from([("HOME".to_string(), dir.path().display().to_string())]);
    let profile = Profile::load(dir.path(), "p", &env).expect("profile loads");
    let url = DatabaseUrl::new(format!(
        "sqlite:{}?mode=rwc",
        dir.path().join("eagle.db").display()
    ));
    let store = Store::open(&url).await.expect("store");
    let poster = Poster {
        identity: "eagle".into(),
        channel: "executor".into(),
    };
    let bot = bot();
    let echo = Fixture::Echo(Echo {
        words: "hello".into(),
    });
    let mut answers = Vec::new();
    for (user, is_bot) in [(5, false), (6, false), (5, true)] {
        let message = message(user, is_bot);
        let mut tx = store.begin_write().await.expect("transaction");
        let mut cx = CommandContext::new(&mut tx, &profile, &bot, &poster, &message);
        let reply = echo.execute(&mut cx).await.expect("executed");
        answers.push((reply.ok, reply.text));
    }
    let approver = "Ann @\u{200b}**all** said hello".to_string();
    assert_eq!(
        answers,
        [
            (true, approver),
            (
                false,
                "You may not use `!echo`: you are not in this profile's approvers. \
                 It changes what runs, so only approvers may."
                    .into()
            ),
            (
                false,
                "Bots may not use `!echo`: only people decide what runs.".into()
            ),
        ]
    );
}
