//! The `eagle` binary: the one place that reads the process's environment,
//! then logging, the command line and a runtime; the rest is in the library.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    // Called as a worker's `git-remote-eagle` or `gh`.
    if let Some(code) =
        eagle::worker::shims::dispatch(&std::env::args_os().collect::<Vec<_>>(), &env)
    {
        return code;
    }
    let cli = eagle::cli::Cli::parse();
    if cli.command.is_worker_side() {
        // A worker's own commands: no runtime, no profile, no logging setup.
        return eagle::cli::run_worker_side(cli, env);
    }
    eagle::ground::host::limit_malloc_arenas();
    eagle::ops::logging::init(
        cli.command.default_log_filter(),
        env.get("RUST_LOG").map(String::as_str),
        // Colours only for a person at a terminal: a file, a pipe or the
        // journal gets plain text (and `NO_COLOR` is honoured).
        std::io::stderr().is_terminal() && !env.contains_key("NO_COLOR"),
        cli.log_format,
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("eagle: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let process = eagle::cli::Process {
        env,
        exe: std::env::current_exe().ok(),
        interactive: std::io::stdin().is_terminal(),
    };
    let result = runtime.block_on(eagle::cli::run(cli, process));
    // Everything of ours has finished by now; what may be left is a
    // blocking read of standard input (the shell stopped by a signal),
    // which must not hold the process.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("eagle: {e:#}");
            ExitCode::FAILURE
        }
    }
}
