//! The `eagle` binary: logging, the command line, and a runtime; the rest is
//! in the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = eagle::cli::Cli::parse();
    if cli.command.is_worker_side() {
        // A worker's own commands: no runtime, no profile, no logging setup.
        return eagle::cli::run_worker_side(cli, eagle::profile::process_env());
    }
    eagle::host::limit_malloc_arenas();
    eagle::logging::init(cli.command.default_log_filter());
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
    let env = eagle::profile::process_env();
    match runtime.block_on(eagle::cli::run(cli, env)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("eagle: {e:#}");
            ExitCode::FAILURE
        }
    }
}
