//! Running the analysis command like a worker: task text is untrusted, so
//! the command gets an empty working directory, its own session and
//! process group (through the worker shim), the analyzer's Unix user, an
//! environment built from nothing but what is listed, and two watchdogs (no
//! output, hard limit) that end its whole group.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use crate::ground::host::{self, UnixUser};
use crate::profile::{AnalyzerSettings, WorkerCommand, WorkerKind};

/// The most output kept from one analysis.
const MAX_OUTPUT: usize = 1 << 20;

/// How an analysis run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ran {
    /// It exited 0; this is what it printed.
    Answered(String),
    /// It failed, or a watchdog stopped it: why, in words.
    Failed(String),
}

/// Runs the analysis command for tasks.
#[derive(Debug)]
pub struct AnalysisCommand {
    pub command: WorkerCommand,
    pub settings: AnalyzerSettings,
    /// Eagle's own binary (for the shim).
    pub exe: PathBuf,
    /// Where each analysis gets its directory.
    pub dir: PathBuf,
    pub user: Option<UnixUser>,
    /// How the command is confined; `None`: unconfined (`mode = "off"`).
    /// Confined, its only network is an egress proxy of its own that lets
    /// through `settings.allow_hosts`.
    pub sandbox: Option<crate::confine::sandbox::Confinement>,
    pub store: crate::store::Store,
    /// Eagle's data directory: with a user of its own, the command may pass
    /// through it (and below it, down to its directory), never list it.
    pub data_dir: PathBuf,
    /// Confined, how its proxy reads the model API's calls (Eagle's
    /// authority) and sets the key the command does not hold.
    pub reading: Option<(
        std::sync::Arc<crate::confine::egress::Interception>,
        Option<std::sync::Arc<crate::confine::egress::model::ModelGate>>,
    )>,
}

/// Kills a process group when dropped: what the shim started must not
/// outlive an analysis Eagle gave up on. Disarmed once the shim is reaped
/// (its id may then be reused).
struct KillGroupOnDrop(Option<i32>);

impl KillGroupOnDrop {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = host::signal_group(pgid, libc::SIGKILL);
        }
    }
}

impl AnalysisCommand {
    /// Runs the command for task `task_id` with `prompt`.
    pub async fn run(&self, task_id: i64, prompt: &str) -> Ran {
        match self.try_run(task_id, prompt).await {
            Ok(ran) => ran,
            Err(error) => Ran::Failed(format!("the analysis could not start: {error}")),
        }
    }

    async fn try_run(&self, task_id: i64, prompt: &str) -> std::io::Result<Ran> {
        let base = self.dir.join(task_id.to_string());
        let work = base.join("work");
        let home = base.join("home");
        std::fs::create_dir_all(&base)?;
        if self.user.is_some() {
            self.passable()?;
        }
        host::chmod(&self.dir, 0o711)?;
        host::chmod(&base, 0o711)?;
        for dir in [&work, &home] {
            fresh_dir(dir, self.user.as_ref())?;
        }
        let exit_file = base.join("exit");
        let exit = std::fs::File::create(&exit_file)?;
        let argv = self.argv(&work);
        // The prompt (the task's text) on stdin, never on the command line.
        let input = crate::executor::runner::prompt_input(&base, "prompt", prompt)?;
        let deadline = self.settings.hard_timeout + Duration::from_secs(30);
        let mut command = tokio::process::Command::new(&self.exe);
        command
            .arg("worker-shim")
            .arg("--deadline")
            .arg(deadline.as_secs().to_string());
        // Served while the command runs; stopped (its socket gone) when
        // this returns, whichever way.
        let mut _egress = None;
        let mut trust = BTreeMap::new();
        if let Some(confinement) = &self.sandbox {
            // Its own directory writable, nothing of Eagle's readable; its
            // egress bridge leads to its own proxy's socket beside it.
            let socket = base.join("egress.sock");
            let listener = crate::confine::egress::bind(&socket, self.user.as_ref())?;
            _egress = Some(listener.serve(crate::confine::egress::Egress {
                client: crate::confine::egress::Client::Analysis { task: task_id },
                store: self.store.clone(),
                allow: std::sync::Arc::new(self.settings.allow_hosts.clone()),
                limits: crate::confine::egress::EgressLimits::default(),
                interception: self.reading.as_ref().map(|(i, _)| i.clone()),
                model: self.reading.as_ref().and_then(|(_, m)| m.clone()),
            }));
            // Its trust in Eagle's authority, in a directory of Eagle's it
            // reads.
            let mut read = Vec::new();
            if let Some((interception, _)) = &self.reading {
                let files = base.join("trust");
                std::fs::create_dir_all(&files)?;
                host::chmod(&files, 0o755)?;
                trust = crate::executor::runner::interception::trust_files(interception, &files)?;
                read.push(files);
            }
            let spec = confinement.spec(
                vec![work.clone(), home.clone()],
                read,
                std::slice::from_ref(&self.dir),
                None,
                Some(socket),
            );
            let path = base.join("sandbox.json");
            spec.write_to(&path)?;
            command.arg("--sandbox").arg(path);
        }
        command
            .arg("--")
            .args(&argv)
            .env_clear()
            .envs(self.environment(&home))
            .envs(&trust)
            .current_dir(&work)
            .stdin(Stdio::from(input))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let exit_fd = std::os::fd::AsRawFd::as_raw_fd(&exit);
        host::own_session(&mut command, self.user.as_ref(), exit_fd);
        let mut child = command.spawn()?;
        drop(exit);
        let pgid = child.id().map(|pid| pid as i32);
        // If this future is dropped (Eagle shutting down) the whole group
        // goes with it, not only the shim.
        let mut group = KillGroupOnDrop(pgid);
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut out_open, mut err_open) = (true, true);
        let hard = tokio::time::sleep(self.settings.hard_timeout);
        tokio::pin!(hard);
        let mut buf_out = [0u8; 8192];
        let mut buf_err = [0u8; 8192];
        let stopped = loop {
            if !out_open && !err_open {
                break None;
            }
            let quiet = tokio::time::sleep(self.settings.no_output_timeout);
            tokio::select! {
                read = stdout.read(&mut buf_out), if out_open => match read {
                    Ok(0) | Err(_) => out_open = false,
                    Ok(n) => keep(&mut out, &buf_out[..n]),
                },
                read = stderr.read(&mut buf_err), if err_open => match read {
                    Ok(0) | Err(_) => err_open = false,
                    Ok(n) => keep(&mut err, &buf_err[..n]),
                },
                () = quiet => break Some(format!(
                    "it printed nothing for {}",
                    humantime::format_duration(self.settings.no_output_timeout)
                )),
                () = &mut hard => break Some(format!(
                    "it ran past its limit of {}",
                    humantime::format_duration(self.settings.hard_timeout)
                )),
            }
        };
        if let Some(why) = stopped {
            if let Some(pgid) = pgid {
                let _ = host::signal_group(pgid, libc::SIGKILL);
            }
            let _ = child.wait().await;
            group.disarm();
            return Ok(Ran::Failed(format!("the analysis was stopped: {why}")));
        }
        let status = child.wait().await;
        group.disarm();
        let status = status?;
        let recorded = std::fs::read_to_string(&exit_file).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&base);
        let out = String::from_utf8_lossy(&out).into_owned();
        match recorded.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["exit", "0"] => Ok(Ran::Answered(out)),
            ["exit", code] => Ok(Ran::Failed(format!(
                "the analysis command exited with {code}{}",
                tail(&err)
            ))),
            ["signal", n] => Ok(Ran::Failed(format!(
                "the analysis command was killed by signal {n}"
            ))),
            _ if status.success() => Ok(Ran::Answered(out)),
            _ => Ok(Ran::Failed(format!(
                "the analysis command failed ({status}){}",
                tail(&err)
            ))),
        }
    }

    /// Lets the command's user pass through Eagle's directories from the
    /// data directory down to the analyses' (not list them).
    fn passable(&self) -> std::io::Result<()> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        for dir in self.dir.ancestors() {
            if !dir.starts_with(&self.data_dir) {
                break;
            }
            let meta = std::fs::metadata(dir)?;
            if meta.uid() == host::euid() {
                host::chmod(dir, (meta.permissions().mode() & 0o7777) | 0o011)?;
            }
        }
        Ok(())
    }

    fn argv(&self, work: &Path) -> Vec<String> {
        let values: BTreeMap<&str, String> = [("workdir", work.display().to_string())]
            .into_iter()
            .collect();
        let mut argv = crate::executor::runner::fill_argv(&self.command.argv, &values);
        if self.command.kind == WorkerKind::Claude && !argv.iter().any(|a| a == "--output-format") {
            argv.extend(["--output-format", "json"].map(String::from));
        }
        argv
    }

    fn environment(&self, home: &Path) -> BTreeMap<String, String> {
        crate::executor::child_env::child_env(
            &self.settings.env,
            &self.exe,
            home,
            None,
            self.command.kind,
        )
    }
}

/// A directory the command owns, created afresh (a previous analysis of
/// the same task may have left one: it is removed first, never reused).
fn fresh_dir(path: &Path, user: Option<&UnixUser>) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::remove_file(path)?,
        Ok(_) => std::fs::remove_dir_all(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir(path)?;
    host::chmod(path, 0o700)?;
    if let Some(user) = user {
        std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid))?;
    }
    Ok(())
}

fn keep(into: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_OUTPUT.saturating_sub(into.len());
    into.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// The end of what the command printed on stderr, for the reason.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let start = text.char_indices().rev().nth(300).map_or(0, |(at, _)| at);
    format!(": {}", crate::ground::text::one_line(&text[start..], 300))
}
