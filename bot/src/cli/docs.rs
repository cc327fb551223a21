//! `eagle completions <shell>` and `eagle man [--out DIR]`: the shell
//! completions and the manual pages, generated from the clap definitions
//! themselves, so that they never disagree with `--help`. Neither reads a
//! profile nor opens a database.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::CommandFactory as _;

use super::Cli;

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
