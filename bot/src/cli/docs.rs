//! `eagle completions <shell>` and `eagle man [--out DIR]`: the shell
//! completions and the manual pages, generated from the clap definitions
//! themselves, so that they never disagree with `--help`; and `eagle man
//! --chat`, the chat commands' reference (`docs/commands.md`), generated from
//! the command definitions `!help` reads. None reads a profile or opens a
//! database.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::CommandFactory as _;

use super::Cli;
use crate::chat::commands::{Access, SPECS};

/// Prints the completion script for `shell`.
pub(super) fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "eagle", &mut out);
    std::io::stdout()
        .lock()
        .write_all(&out)
        .context("cannot write the completion script")?;
    Ok(ExitCode::SUCCESS)
}

/// Prints `eagle.1`, or with `out` writes it and a page per visible
/// subcommand (`eagle-run.1`, `eagle-profile-list.1`, …) into that directory.
pub(super) fn man(out: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command();
    // Subcommands get their full names (`eagle-profile-list`) once built.
    command.build();
    match out {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command)
                .render(&mut page)
                .context("cannot render the manual page")?;
            std::io::stdout()
                .lock()
                .write_all(&page)
                .context("cannot write the manual page")?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let mut written = Vec::new();
            write_pages(&command, dir, &mut written)?;
            for path in written {
                println!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_pages(
    command: &clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name());
    let path = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .title(name)
        .render(&mut page)
        .with_context(|| format!("cannot render {name}.1"))?;
    std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    written.push(path);
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

/// Prints the chat commands' reference, in Markdown.
pub(super) fn chat_commands() -> anyhow::Result<ExitCode> {
    std::io::stdout()
        .lock()
        .write_all(chat_reference().as_bytes())
        .context("cannot write the chat commands' reference")?;
    Ok(ExitCode::SUCCESS)
}

/// The chat commands' reference: every command's usage, summary, details
/// and who may use it, in the order `!help` lists them. `docs/commands.md`
/// is this text, and a test holds it so.
fn chat_reference() -> String {
    let mut out = String::from(
        "# Chat commands\n\n\
         <!-- Generated from the command definitions (bot/src/chat/commands), the ones `!help` \
         reads. Do not edit: `cargo run -q -- man --chat > docs/commands.md` writes it. -->\n\n\
         People give Eagle commands in chat: on Zulip in any topic Eagle listens in, or in \
         `eagle shell`. A command is a line that starts with `!`, also right after an \
         @-mention of Eagle, outside code fences and quotes; one message may hold several \
         (at most `[chat] max_commands`, 10 by default). `!help` lists the commands and \
         `!help <command>` explains one. Commands marked *approvers* change what runs: only \
         the people in the profile's `approvers` may use them, and never a bot. In \
         `eagle shell` with no approvers configured, the local user is the owner and an \
         approver.\n\n\
         | Command | What it does | Who |\n|---|---|---|\n",
    );
    for spec in SPECS {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            spec.usage().replace('|', "\\|"),
            spec.summary.replace('|', "\\|"),
            who(spec.access)
        ));
    }
    for spec in SPECS {
        out.push_str(&format!(
            "\n## `{}`\n\n{}.\n\n{}\n\n{}\n",
            spec.usage(),
            capitalised(spec.summary),
            spec.details,
            match spec.access {
                Access::Anyone => "Anyone may use it.",
                Access::Approvers => "Only the profile's approvers may use it.",
            }
        ));
    }
    out
}

fn who(access: Access) -> &'static str {
    match access {
        Access::Anyone => "anyone",
        Access::Approvers => "*approvers*",
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}
