//! The analyzer: every pending task is judged by the filter plugins (keep,
//! or skip with every reason kept), and a kept one by the configured
//! analysis command (for_review / awaiting_go / skip, with a summary,
//! complexity, feasibility and priority). With no command, kept tasks go to
//! for_review. One analyzer works per deployment (a lease elects it); it
//! works through everything pending, then waits for the database to say a
//! task came in.
//!
//! Each conclusion, its audit entry and the message that tells the
//! requester (in the conversation the task came from, with the one command
//! that moves it on) are one transaction. Tasks from other sources, and
//! tasks put back by a re-analysis, are told about in one summary per pass
//! in the inbox topic, never a message each.

pub mod answer;
pub mod command;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::executor::runner::{PromptKind, Prompts};
use crate::ground::text::{neutralize_mentions, one_line};
use crate::policy::PolicyHost;
use crate::runtime::background::{BackgroundLoop, LeaseSpec, Next, Tick};
use crate::runtime::posts::{People, Poster};
use crate::store::{Analysis, Destination, SkipReason, Store, Task, TaskStatus};

pub use command::{AnalysisCommand, Ran};

/// The analyzer's lease.
const LEASE: &str = "analyzer";
/// How long the lease lasts without renewal.
const LEASE_TTL: Duration = Duration::from_secs(60);
/// How often the lease is looked at while an analysis command runs.
const LEASE_RENEW: Duration = Duration::from_secs(20);
/// Tasks read per round.
const BATCH: i64 = 100;
/// Task ids listed by name in a summary; the rest are counted.
const SUMMARY_IDS: usize = 20;
/// The actor in the audit log.
const ACTOR: &str = "analyzer";

/// What the filters said of a task.
#[derive(Debug, Clone)]
enum Verdict {
    Keep,
    /// Skipped, with every filter's reason.
    Skip(Vec<SkipReason>),
}

/// Conclusions that need no command, written per transaction.
const QUICK_CHUNK: usize = 100;

/// How a conclusion reaches people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    /// In the task's own conversation (or not at all: nothing to add).
    Directly,
    /// In the summary of the re-analysis that put it back.
    Quiet,
    /// In the pass's summary in the inbox topic (a task from elsewhere).
    Summarise,
}

/// What one pass concluded, for the summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassSummary {
    pub awaiting_go: Vec<i64>,
    pub for_review: Vec<i64>,
    pub skipped: Vec<i64>,
}

impl PassSummary {
    pub fn total(&self) -> usize {
        self.awaiting_go.len() + self.for_review.len() + self.skipped.len()
    }

    fn add(&mut self, other: &PassSummary) {
        self.awaiting_go.extend(&other.awaiting_go);
        self.for_review.extend(&other.for_review);
        self.skipped.extend(&other.skipped);
    }

    /// One message for a batch of conclusions.
    pub fn text(&self, what: &str) -> String {
        let ids = |ids: &[i64]| {
            let mut shown: Vec<String> = ids
                .iter()
                .take(SUMMARY_IDS)
                .map(|id| format!("#{id}"))
                .collect();
            if ids.len() > SUMMARY_IDS {
                shown.push(format!("and {} more", ids.len() - SUMMARY_IDS));
            }
            shown.join(", ")
        };
        let mut lines = vec![format!("Analysed {} {what}:", self.total())];
        if !self.awaiting_go.is_empty() {
            lines.push(format!(
                "* {} ready to start: {}",
                self.awaiting_go.len(),
                ids(&self.awaiting_go)
            ));
        }
        if !self.for_review.is_empty() {
            lines.push(format!(
                "* {} for a human look: {}",
                self.for_review.len(),
                ids(&self.for_review)
            ));
        }
        if !self.skipped.is_empty() {
            lines.push(format!(
                "* {} skipped: {}",
                self.skipped.len(),
                ids(&self.skipped)
            ));
        }
        lines.push("`!status <task>` shows each; an approver's `!go <task>` starts one.".into());
        lines.join("\n")
    }
}

/// The analyzer of one profile.
pub struct Analyzer {
    pub store: Store,
    pub policy: PolicyHost,
    pub prompts: Prompts,
    /// `None`: filters only.
    pub command: Option<Arc<AnalysisCommand>>,
    /// Posts under the profile's identity.
    pub poster: Poster,
    /// Where summaries go.
    pub inbox: Destination,
    /// How requesters are named (silently) when they are told.
    pub people: People,
    /// What the last pass did (`eagle analyze` prints it).
    pub last_pass: PassSummary,
}

/// What Eagle says when it would run the analysis command as root.
pub const ANALYSIS_AS_ROOT: &str = "the analysis command would run as root (Eagle runs as root and \
     analyzer.worker_user is unset or root): set analyzer.worker_user to a user of its own \
     (useradd --system --create-home --shell /usr/sbin/nologin eagle-worker; README.md, \"Isolation\")";

impl Analyzer {
    /// The analyzer of `profile`, posting under `poster`'s identity; `exe`
    /// is the `eagle` binary that runs the analysis command's shim.
    pub fn new(
        profile: &crate::profile::Profile,
        store: Store,
        policy: PolicyHost,
        poster: Poster,
        people: People,
        exe: &Path,
    ) -> anyhow::Result<Analyzer> {
        let settings = &profile.eagle.analyzer;
        let prompts = Prompts::load(profile.executor.runner.prompts_dir.as_deref())
            .map_err(|why| anyhow::anyhow!("profile {}: {why}", profile.name))?;
        let command = match &settings.command {
            None => None,
            Some(command) => {
                let user = match &settings.worker_user {
                    None => None,
                    Some(name) => Some(crate::ground::host::lookup_user(name)?.ok_or_else(|| {
                        anyhow::anyhow!(
                            "profile {}: analyzer.worker_user {name:?} does not exist on this host",
                            profile.name
                        )
                    })?),
                };
                // Task text is untrusted: its command never runs as root.
                if crate::ground::host::euid() == 0 && user.as_ref().is_none_or(|u| u.uid == 0) {
                    anyhow::bail!("profile {}: {ANALYSIS_AS_ROOT}", profile.name);
                }
                let sandbox = match crate::confine::sandbox::limits_of(profile) {
                    None => {
                        tracing::warn!(profile = %profile.name, "the analysis command runs UNCONFINED: [runner.sandbox] mode = \"off\"");
                        None
                    }
                    Some(limits) => {
                        crate::confine::sandbox::probe(exe, user.as_ref()).map_err(|why| {
                            anyhow::anyhow!(
                                "profile {}: the analysis command cannot be confined on this host ({why}); \
                                 Eagle does not run it unconfined unless [runner.sandbox] says mode = \"off\"",
                                profile.name
                            )
                        })?;
                        Some(crate::confine::sandbox::Confinement::of(profile, limits))
                    }
                };
                let reading = match &sandbox {
                    None => None,
                    Some(_) => Some(crate::executor::runner::interception::of_parts(
                        &profile.executor.runner,
                        settings.model.as_ref(),
                        command.kind,
                        &profile.data_dir,
                    )?),
                };
                Some(Arc::new(AnalysisCommand {
                    reading,
                    sandbox,
                    store: store.clone(),
                    command: command.clone(),
                    settings: settings.clone(),
                    exe: exe.to_path_buf(),
                    dir: profile.state_dir().join("analysis"),
                    user,
                    data_dir: profile.data_dir.clone(),
                }))
            }
        };
        Ok(Analyzer {
            store,
            policy,
            prompts,
            command,
            inbox: Destination::Channel {
                channel: settings.inbox_channel.clone(),
                topic: settings.inbox_topic.clone(),
            },
            poster,
            people,
            last_pass: PassSummary::default(),
        })
    }

    /// Analyses everything pending, in rounds, keeping the lease alive, and
    /// posts the summary of what is summarised. Stops early on shutdown.
    pub async fn work(&self, tick: &mut Tick<'_>) -> crate::store::Result<PassSummary> {
        let shutdown = &tick.stop().clone();
        // Woken by every change of the database: one query says whether
        // there is anything to do.
        if self.store.analyses().analyzer_work().await? == 0 {
            return Ok(PassSummary::default());
        }
        self.start_jobs().await?;
        let mut total = PassSummary::default();
        let mut summarised = PassSummary::default();
        loop {
            let tasks = self.store.analyses().pending_tasks(BATCH).await?;
            if tasks.is_empty() {
                break;
            }
            let mut progressed = false;
            let mut note = |id: i64, status: TaskStatus, told: Told| {
                progressed = true;
                let mut one = PassSummary::default();
                match status {
                    TaskStatus::AwaitingGo => one.awaiting_go.push(id),
                    TaskStatus::Skip => one.skipped.push(id),
                    _ => one.for_review.push(id),
                }
                total.add(&one);
                if told == Told::Summarise {
                    summarised.add(&one);
                }
            };
            // The filters first, outside any transaction; what needs no
            // analysis command (a skip, or a keep without one) is concluded
            // in one transaction per chunk.
            let mut quick = Vec::new();
            let mut slow = Vec::new();
            for task in tasks {
                if shutdown.is_cancelled() {
                    break;
                }
                match self.judge(&task).await {
                    Verdict::Keep if self.command.is_some() => slow.push(task),
                    verdict => quick.push((task, verdict)),
                }
            }
            for chunk in quick.chunks(QUICK_CHUNK) {
                let mut tx = self.store.begin_write().await?;
                let mut concluded = Vec::with_capacity(chunk.len());
                for (task, verdict) in chunk {
                    if let Some((status, told)) = self.conclude(&mut tx, task, verdict).await? {
                        concluded.push((task.id, status, told));
                    }
                }
                tx.commit().await?;
                for (id, status, told) in concluded {
                    note(id, status, told);
                }
            }
            for task in slow {
                if shutdown.is_cancelled() {
                    break;
                }
                if let Some((status, told)) = self.analyze_renewing(&task, tick).await? {
                    note(task.id, status, told);
                }
            }
            if shutdown.is_cancelled() || !progressed {
                break;
            }
        }
        if summarised.total() > 0 {
            let mut tx = self.store.begin_write().await?;
            self.poster
                .post_to(&mut tx, self.inbox.clone(), &summarised.text("tasks"))
                .await?;
            tx.commit().await?;
        }
        self.finish_jobs().await?;
        Ok(total)
    }

    /// Takes up what `!reanalyze` asked: a count is answered at once; a
    /// re-analysis puts the tasks back (quietly: they are summarised when
    /// all are through), all in one transaction with its answer.
    async fn start_jobs(&self) -> crate::store::Result<()> {
        for job in self.store.analyses().open_analyzer_jobs().await? {
            if job.reopened.is_some() {
                continue;
            }
            // The filters run outside any write transaction.
            let (ids, skipped) = reanalysis_candidates(&self.store, &self.policy).await?;
            let poster = Poster {
                identity: job.reply_identity.clone(),
                channel: self.poster.channel.clone(),
            };
            let mut tx = self.store.begin_write().await?;
            if !job.reanalyze || ids.is_empty() {
                if !tx.analyses().finish_analyzer_job(job.id).await? {
                    continue;
                }
                let text = format!(
                    "{} of {skipped} skipped task(s) would be kept by the current filters.{}",
                    ids.len(),
                    if ids.is_empty() {
                        " Nothing to put back."
                    } else {
                        " `!reanalyze confirm` puts them back for analysis (one summary follows, not a message each)."
                    }
                );
                poster.post_to(&mut tx, job.reply_to.clone(), &text).await?;
                tx.commit().await?;
                continue;
            }
            let mut reopened = Vec::with_capacity(ids.len());
            for id in &ids {
                if tx
                    .analyses()
                    .reopen_for_analysis(*id, &job.requested_by, true)
                    .await?
                {
                    reopened.push(*id);
                }
            }
            if !tx.analyses().set_job_reopened(job.id, &reopened).await? {
                // Another analyzer took it up: this transaction goes.
                continue;
            }
            let text = format!(
                "Put {} of {skipped} skipped task(s) back for analysis; one summary follows when they are through.",
                reopened.len()
            );
            poster.post_to(&mut tx, job.reply_to.clone(), &text).await?;
            tx.commit().await?;
        }
        Ok(())
    }

    /// Ends the re-analyses whose tasks are all concluded, each with one
    /// summary where it was asked for.
    async fn finish_jobs(&self) -> crate::store::Result<()> {
        for job in self.store.analyses().open_analyzer_jobs().await? {
            let Some(ids) = &job.reopened else { continue };
            let statuses = self.store.analyses().task_statuses(ids).await?;
            if statuses.iter().any(|(_, s)| *s == TaskStatus::Pending) {
                continue;
            }
            let mut summary = PassSummary::default();
            for (id, status) in statuses {
                match status {
                    TaskStatus::AwaitingGo => summary.awaiting_go.push(id),
                    TaskStatus::Skip => summary.skipped.push(id),
                    _ => summary.for_review.push(id),
                }
            }
            let poster = Poster {
                identity: job.reply_identity.clone(),
                channel: self.poster.channel.clone(),
            };
            let mut tx = self.store.begin_write().await?;
            if !tx.analyses().finish_analyzer_job(job.id).await? {
                continue;
            }
            poster
                .post_to(
                    &mut tx,
                    job.reply_to.clone(),
                    &summary.text("skipped task(s) again"),
                )
                .await?;
            tx.commit().await?;
        }
        Ok(())
    }

    /// Analyses one task while renewing the lease in the background (an
    /// analysis command may take minutes). `None` if another analyzer or a
    /// person concluded on it first.
    async fn analyze_renewing(
        &self,
        task: &Task,
        tick: &mut Tick<'_>,
    ) -> crate::store::Result<Option<(TaskStatus, Told)>> {
        let shutdown = tick.stop().clone();
        let analysis = self.analyze(task);
        tokio::pin!(analysis);
        loop {
            tokio::select! {
                done = &mut analysis => return done,
                _ = tokio::time::sleep(LEASE_RENEW) => {
                    if !tick.leads().await.unwrap_or(false) {
                        tracing::warn!(task = task.id, "the analyzer's lease went elsewhere; its writes stay fenced by the task's status");
                    }
                }
                _ = shutdown.cancelled() => return Ok(None),
            }
        }
    }

    /// What the filter plugins say of a task.
    async fn judge(&self, task: &Task) -> Verdict {
        let decision = self
            .policy
            .filter(&crate::eagle::decider::policy_task(task))
            .await;
        if decision.keep {
            return Verdict::Keep;
        }
        Verdict::Skip(
            decision
                .reasons
                .iter()
                .map(|(plugin, reason)| SkipReason {
                    plugin: format!("{} {}", plugin.name, plugin.version),
                    reason: reason.clone(),
                })
                .collect(),
        )
    }

    /// Records what needs no analysis command, inside `tx`: a filter's skip,
    /// or a keep when there is no command. `None` if the task is no longer
    /// pending.
    async fn conclude(
        &self,
        tx: &mut crate::store::Tx,
        task: &Task,
        verdict: &Verdict,
    ) -> crate::store::Result<Option<(TaskStatus, Told)>> {
        match verdict {
            Verdict::Skip(reasons) => {
                if !tx
                    .analyses()
                    .record_filter_skip(task.id, reasons, ACTOR)
                    .await?
                {
                    return Ok(None);
                }
                let told = self.tell(tx, task, &skip_text(task, reasons)).await?;
                Ok(Some((TaskStatus::Skip, told)))
            }
            Verdict::Keep => {
                let analysis = Analysis {
                    status: Some(TaskStatus::ForReview),
                    reason: "kept by the filters (no analysis command is configured)".into(),
                    ..Analysis::default()
                };
                if !tx
                    .analyses()
                    .record_analysis(task.id, &analysis, ACTOR)
                    .await?
                {
                    return Ok(None);
                }
                // The task simply waits for an approver's `!go`, which its
                // requester knows from the queue reply: a message would only
                // repeat it (tasks from elsewhere and re-analysed ones are
                // summarised).
                let told = if !task.quiet_analysis && origin_destination(task).is_some() {
                    Told::Directly
                } else {
                    self.tell(tx, task, &analysis_text(task, &analysis)).await?
                };
                Ok(Some((TaskStatus::ForReview, told)))
            }
        }
    }

    /// A task the filters kept, through the analysis command. Returns the
    /// status concluded and how it is told.
    async fn analyze(&self, task: &Task) -> crate::store::Result<Option<(TaskStatus, Told)>> {
        let Some(command) = &self.command else {
            return Ok(None);
        };
        let known = self.store.repos().list().await?;
        let known: Vec<String> = known.into_iter().map(|r| r.name).collect();
        let mut analysis = self.run_command(command, task, &known).await;
        let status = analysis.status.unwrap_or(TaskStatus::ForReview);
        // A repository is kept only where the task names none and an
        // executor has it (or none has announced any yet).
        if let Some(repo) = analysis.repo.take() {
            if task.repo.is_none() && (known.is_empty() || known.contains(&repo)) {
                analysis.repo = Some(repo);
            } else if task.repo.is_none() {
                analysis.reason.push_str(&format!(
                    "; it named the repository {repo:?}, which no executor has"
                ));
            }
        }
        let mut tx = self.store.begin_write().await?;
        if !tx
            .analyses()
            .record_analysis(task.id, &analysis, ACTOR)
            .await?
        {
            return Ok(None);
        }
        let told = self
            .tell(&mut tx, task, &analysis_text(task, &analysis))
            .await?;
        tx.commit().await?;
        Ok(Some((status, told)))
    }

    async fn run_command(
        &self,
        command: &AnalysisCommand,
        task: &Task,
        repos: &[String],
    ) -> Analysis {
        let prompt = self
            .prompts
            .render(PromptKind::Analysis, &prompt_values(task, repos));
        match command.run(task.id, &prompt).await {
            Ran::Answered(output) => match answer::parse(&output) {
                Ok(analysis) => analysis,
                Err(why) => Analysis {
                    status: Some(TaskStatus::ForReview),
                    raw: Some(crate::runtime::posts::cap(&output, 20_000)),
                    reason: format!("the analysis answer could not be read ({why}); a human looks"),
                    ..Analysis::default()
                },
            },
            Ran::Failed(why) => {
                tracing::warn!(
                    task = task.id,
                    why,
                    "an analysis failed; the task is left for review"
                );
                Analysis {
                    status: Some(TaskStatus::ForReview),
                    reason: format!("{why}; a human looks"),
                    ..Analysis::default()
                }
            }
        }
    }

    /// Tells the requester in the task's own conversation, unless the task
    /// is summarised instead: in the inbox topic (another source), or by
    /// its re-analysis (quiet).
    async fn tell(
        &self,
        tx: &mut crate::store::Tx,
        task: &Task,
        text: &str,
    ) -> crate::store::Result<Told> {
        if task.quiet_analysis {
            tx.analyses().clear_quiet(task.id).await?;
            return Ok(Told::Quiet);
        }
        let Some(to) = origin_destination(task) else {
            return Ok(Told::Summarise);
        };
        let greeting = self
            .people
            .requester_silently(task)
            .map(|mention| format!("{mention} "))
            .unwrap_or_default();
        self.poster
            .post_to(tx, to, &format!("{greeting}{text}"))
            .await?;
        Ok(Told::Directly)
    }

    /// Re-analysis (the seed's Phase 7): see [`reanalysis_candidates`].
    pub async fn reanalysis_candidates(&self) -> crate::store::Result<(Vec<i64>, usize)> {
        reanalysis_candidates(&self.store, &self.policy).await
    }

    /// Puts `ids` back for analysis (quietly: one summary at the end).
    /// Returns how many went back.
    pub async fn reopen(&self, ids: &[i64], actor: &str) -> crate::store::Result<usize> {
        let mut reopened = 0;
        for chunk in ids.chunks(200) {
            let mut tx = self.store.begin_write().await?;
            for id in chunk {
                if tx.analyses().reopen_for_analysis(*id, actor, true).await? {
                    reopened += 1;
                }
            }
            tx.commit().await?;
        }
        Ok(reopened)
    }
}

impl BackgroundLoop for Analyzer {
    const NAME: &'static str = "analyzer";

    fn lease(&self) -> Option<LeaseSpec> {
        Some(LeaseSpec {
            name: LEASE,
            ttl: LEASE_TTL,
        })
    }

    /// Works through everything pending, then waits for the database to
    /// say a task came in.
    async fn tick(&mut self, tick: &mut Tick<'_>) -> anyhow::Result<Next> {
        self.last_pass = self.work(tick).await?;
        Ok(Next::Idle)
    }
}

/// Re-analysis (the seed's Phase 7): the skipped tasks the current filters
/// would keep, without changing anything. Returns (their ids, how many
/// tasks are skipped in all).
pub async fn reanalysis_candidates(
    store: &Store,
    policy: &PolicyHost,
) -> crate::store::Result<(Vec<i64>, usize)> {
    let mut keep = Vec::new();
    let mut total = 0;
    let mut after = 0;
    loop {
        let tasks = store.analyses().skipped_tasks(after, 500).await?;
        let Some(last) = tasks.last() else { break };
        after = last.id;
        for task in &tasks {
            total += 1;
            if policy
                .filter(&crate::eagle::decider::policy_task(task))
                .await
                .keep
            {
                keep.push(task.id);
            }
        }
    }
    Ok((keep, total))
}

/// Where a task's conclusion is told: its chat conversation, if it has one.
pub fn origin_destination(task: &Task) -> Option<Destination> {
    match task.origin_transport.as_deref() {
        Some("zulip") => match (&task.origin_channel, &task.origin_topic) {
            (Some(channel), Some(topic)) => Some(Destination::Channel {
                channel: channel.clone(),
                topic: topic.clone(),
            }),
            _ => task
                .requested_by_id
                .filter(|id| *id > 0)
                .map(|id| Destination::Direct { user_ids: vec![id] }),
        },
        Some("shell") => Some(Destination::Channel {
            channel: task
                .origin_channel
                .clone()
                .unwrap_or_else(|| "shell".into()),
            topic: task.origin_topic.clone().unwrap_or_default(),
        }),
        _ => None,
    }
}

/// The analysis prompt's values; `repos`: the executors' repositories.
fn prompt_values(task: &Task, repos: &[String]) -> BTreeMap<&'static str, String> {
    let list = |json: &str| {
        serde_json::from_str::<Vec<String>>(json)
            .unwrap_or_default()
            .join(", ")
    };
    [
        ("task_id", task.id.to_string()),
        ("title", task.title.clone()),
        ("description", task.description.clone()),
        ("source", task.source.clone()),
        ("links", list(&task.links)),
        ("tags", list(&task.tags)),
        (
            "repos",
            match (&task.repo, repos) {
                (Some(repo), _) => format!("{repo} (named by a person)"),
                (None, []) => "one (leave `repo` out)".to_string(),
                (None, repos) => repos.join(", "),
            },
        ),
    ]
    .into_iter()
    .collect()
}

fn title(task: &Task) -> String {
    neutralize_mentions(&one_line(&task.title, 120))
}

fn skip_text(task: &Task, reasons: &[SkipReason]) -> String {
    let why = reasons
        .iter()
        .map(|r| {
            format!(
                "{} ({})",
                neutralize_mentions(&one_line(&r.reason, 200)),
                r.plugin
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    format!(
        "Task #{} ({}) is skipped: {why}. An approver's `!go {}` takes it anyway.",
        task.id,
        title(task),
        task.id
    )
}

fn analysis_text(task: &Task, analysis: &Analysis) -> String {
    let mut facts = Vec::new();
    if let Some(c) = &analysis.complexity {
        facts.push(format!("complexity {c}"));
    }
    if let Some(f) = &analysis.feasibility {
        facts.push(format!("feasibility {f}"));
    }
    if let Some(p) = analysis.priority {
        facts.push(format!("priority {p}"));
    }
    if let Some(r) = analysis.repo.as_ref().or(task.repo.as_ref()) {
        facts.push(format!("repository {r}"));
    }
    let facts = if facts.is_empty() {
        String::new()
    } else {
        format!(" ({})", facts.join(", "))
    };
    let summary = analysis
        .summary
        .as_deref()
        .map(|s| format!(" {}", neutralize_mentions(&one_line(s, 400))))
        .unwrap_or_default();
    let id = task.id;
    let head = format!("Task #{id} ({})", title(task));
    match analysis.status.unwrap_or(TaskStatus::ForReview) {
        TaskStatus::AwaitingGo => {
            format!("{head} is ready to start{facts}.{summary} `!go {id}` starts it.")
        }
        TaskStatus::Skip => format!(
            "{head} is skipped by the analysis{facts}.{summary} An approver's `!go {id}` takes it anyway."
        ),
        _ => format!(
            "{head} needs a human look: {}{facts}.{summary} `!go {id}` starts it.",
            neutralize_mentions(&analysis.reason)
        ),
    }
}
