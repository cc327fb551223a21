//! `eagle check`: whether a profile is ready to run (its settings, the
//! database, the workers' isolation, GitHub, Asana and the analyzer, the
//! Zulip credentials and subscriptions, the plugins), each finding saying
//! what to fix.

use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::profile::Profile;
use crate::transport::zulip::zuliprc::ZulipCredentials;

pub(super) async fn check(
    profile: &Profile,
    env: &BTreeMap<String, String>,
    exe: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    println!(
        "ok    profile {}: settings are valid ({})",
        profile.name,
        profile.source()
    );
    let store = super::open_store(profile).await?;
    println!(
        "ok    database {}: reachable, {} migration(s) applied",
        store.url(),
        store.applied_migrations().await?
    );
    let week = std::time::Duration::from_secs(7 * 24 * 3600);
    match store.outbox().given_up(&profile.name, week).await? {
        (0, _) => println!("ok    outbox: nothing given up in the last 7 days"),
        (n, last) => println!(
            "WARN  outbox: {n} message(s) could not be delivered in the last 7 days and were given up (the last: {})",
            last.as_deref().unwrap_or("no error recorded")
        ),
    }
    store.close().await;
    let mut local_ok = true;
    for (severity, text) in crate::executor::runner::checks(profile)
        .into_iter()
        .chain([crate::executor::runner::sandbox_check(profile, exe)])
        .chain(integration_checks(profile))
    {
        use crate::executor::runner::Severity;
        let label = match severity {
            Severity::Ok => "ok  ",
            Severity::Warn => "WARN",
            Severity::Fail => "FAIL",
        };
        local_ok &= severity != Severity::Fail;
        println!("{label}  {text}");
    }
    if let Some(github) = &profile.github {
        let finding = github_auth_finding(github).await;
        let label = if finding.ok { "ok  " } else { "FAIL" };
        println!("{label}  {}", finding.text);
        local_ok &= finding.ok;
    }
    let creds = crate::transport::zulip::zuliprc::credentials(profile, env)?;
    println!(
        "ok    zuliprc {}: {} at {}",
        creds.source, creds.email, creds.site
    );
    let mut findings = zulip_findings(profile, &creds).await;
    // Eagle decides by its plugins: each must load.
    if profile.role == crate::profile::Role::Orchestrator {
        let host = crate::policy::PolicyHost::for_profile(profile).await?;
        for plugin in host.plugins() {
            findings.push(Finding {
                ok: plugin.loaded,
                text: format!(
                    "policy plugin {} ({}): {}",
                    plugin.identity, plugin.identity.source, plugin.state
                ),
            });
        }
    }
    let mut ok = local_ok;
    for finding in &findings {
        println!(
            "{}  {}",
            if finding.ok { "ok  " } else { "FAIL" },
            finding.text
        );
        ok &= finding.ok;
    }
    if ok {
        println!(
            "profile {} is ready: `eagle run --profile {}`",
            profile.name, profile.name
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "profile {} is not ready: fix what FAIL says, then check again",
            profile.name
        );
        Ok(ExitCode::FAILURE)
    }
}

/// Which credential GitHub gets (never the secret); for a GitHub App, that
/// GitHub trades its JWT for an installation token.
async fn github_auth_finding(settings: &crate::profile::GithubSettings) -> Finding {
    let auth = match crate::daemon::clients::github_auth(settings) {
        Ok(auth) => auth,
        Err(e) => {
            return Finding {
                ok: false,
                text: format!("github: {e}"),
            };
        }
    };
    let Some(app_id) = auth.app_id() else {
        return Finding {
            ok: true,
            text: format!(
                "github: authenticates with a {} (github.token_env or github.token_file)",
                auth.kind()
            ),
        };
    };
    match auth.token_for(None).await {
        Ok(_) => Finding {
            ok: true,
            text: format!(
                "github: authenticates as {} {app_id}: an installation token for {} was issued",
                auth.kind(),
                settings.repo
            ),
        },
        Err(e) => Finding {
            ok: false,
            text: format!(
                "github: {} {app_id} gets no installation token for {}: {e}",
                auth.kind(),
                settings.repo
            ),
        },
    }
}

/// What `eagle check` says about the analyzer, GitHub and Asana.
fn integration_checks(profile: &Profile) -> Vec<(crate::executor::runner::Severity, String)> {
    use crate::executor::runner::Severity;
    use crate::profile::Role;
    let mut out = Vec::new();
    let human = |d: std::time::Duration| humantime::format_duration(d).to_string();
    match (&profile.github, profile.role) {
        (Some(g), role) => out.push((
            Severity::Ok,
            match role {
                Role::Executor => format!(
                    "github: the PRs of {} are followed every {} (CI grace {}, {} fix-ci worker(s) and {} PR worker(s) per run at most{})",
                    g.repo,
                    human(g.poll_interval),
                    human(g.ci_grace),
                    g.ci_attempts,
                    g.max_rounds,
                    if g.required_checks.is_empty() {
                        String::new()
                    } else {
                        format!("; required: {}", g.required_checks.join(", "))
                    }
                ),
                Role::Orchestrator => format!(
                    "github: Eagle merges approved merge_pr requests in {} ({})",
                    g.repo, g.merge_method
                ),
            },
        )),
        (None, Role::Executor) => out.push((
            Severity::Warn,
            "no [github]: runs that reach pr wait there, and nothing follows their PRs (profiles/executor.toml, [github])".into(),
        )),
        (None, Role::Orchestrator) => out.push((
            Severity::Ok,
            "no [github]: an approved merge_pr is recorded, and the merge is left to a human".into(),
        )),
    }
    if profile.role == Role::Executor {
        let repos = &profile.executor.runner.repos;
        if repos.is_empty() {
            out.push((
                Severity::Warn,
                "no repository: runs work in an empty directory (profiles/executor.toml, [[runner.repos]])".into(),
            ));
        }
        for repo in repos {
            let cache = crate::executor::repos::cache_path(&profile.data_dir, &repo.name);
            let age = std::fs::metadata(cache.join("FETCH_HEAD"))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .map_or_else(
                    || "no cache yet (the first run fetches the whole history)".to_string(),
                    |d| {
                        format!(
                            "cache fetched {} ago",
                            human(std::time::Duration::from_secs(d.as_secs()))
                        )
                    },
                );
            let setup = match &repo.setup {
                Some(_) => format!(
                    "; a setup (network: {})",
                    if repo.setup_allow_hosts.is_empty() {
                        "none".to_string()
                    } else {
                        repo.setup_allow_hosts
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
                None => String::new(),
            };
            out.push((
                Severity::Ok,
                format!(
                    "repository {}: {} (base {}{}), credential: {}; {age}{setup}",
                    repo.name,
                    repo.url.as_git(),
                    repo.base,
                    repo.github
                        .as_ref()
                        .map(|g| format!(", PRs in {g}"))
                        .unwrap_or_default(),
                    repo.credential.kind(),
                ),
            ));
        }
    }
    if profile.role == Role::Orchestrator {
        out.push(match &profile.eagle.conversation {
            Some(c) => (
                Severity::Ok,
                format!(
                    "conversation: questions go to {} ({}, model {}, {} a call; {} tokens a person and ${:.2} in all a day){}",
                    c.backend.as_str(),
                    crate::ground::text::neutralize_mentions(c.url.as_str()),
                    c.model,
                    human(c.timeout),
                    c.user_tokens_per_day,
                    c.cost_per_day_usd,
                    if c.persona.is_some() { "; the persona is the system prompt" } else { "; no persona" }
                ),
            ),
            None => (
                Severity::Ok,
                "no language backend ([conversation]): mentions that are not commands are captured as tasks, thanks, greetings, questions and decisions are answered with the command".into(),
            ),
        });
        if let Some(d) = &profile.eagle.digest {
            out.push((
                Severity::Ok,
                format!(
                    "digest: daily at {:02}:{:02} (UTC{:+}) in #{} > {}",
                    d.at_minute / 60,
                    d.at_minute % 60,
                    f64::from(d.utc_offset_minutes) / 60.0,
                    d.channel,
                    d.topic
                ),
            ));
        }
        if let Some(command) = &profile.eagle.analyzer.command {
            out.push((
                Severity::Ok,
                format!(
                    "analyzer: filters, then `{}` (no output {}, at most {})",
                    command.template,
                    human(profile.eagle.analyzer.no_output_timeout),
                    human(profile.eagle.analyzer.hard_timeout)
                ),
            ));
        }
        let as_root = crate::ground::host::euid() == 0
            && match profile.eagle.analyzer.worker_user.as_deref() {
                None => true,
                Some(name) => crate::ground::host::lookup_user(name)
                    .ok()
                    .flatten()
                    .is_some_and(|u| u.uid == 0),
            };
        match &profile.eagle.analyzer.command {
            Some(_) if as_root => out.push((
                Severity::Fail,
                crate::eagle::analyzer::ANALYSIS_AS_ROOT.into(),
            )),
            Some(_) => {}
            None => out.push((
                Severity::Ok,
                "analyzer: filters only (no analysis command): kept tasks go to for_review".into(),
            )),
        }
        if let Some(a) = &profile.eagle.asana {
            let mut places = Vec::new();
            places.extend(a.projects.iter().map(|(_, s)| s.clone()));
            places.extend(a.sections.iter().map(|(_, s)| s.clone()));
            places.extend(a.my_tasks.iter().map(|(_, s)| s.clone()));
            places.extend(a.followed_source.iter().cloned());
            out.push((
                Severity::Ok,
                format!(
                    "asana: imports {} every {} (workspace {})",
                    places.join(", "),
                    human(a.poll_interval),
                    a.workspace
                ),
            ));
        }
    }
    out
}

/// One finding of `eagle check`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Finding {
    ok: bool,
    text: String,
}

/// Verifies the credentials against the server and that the bot is
/// subscribed where it must listen; says exactly what to fix.
async fn zulip_findings(profile: &Profile, creds: &ZulipCredentials) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut say = |ok: bool, text: String| findings.push(Finding { ok, text });
    let client = match crate::transport::zulip::Client::new(creds) {
        Ok(client) => client,
        Err(error) => {
            say(
                false,
                format!("cannot set up TLS for {}: {error:#}", creds.site),
            );
            return findings;
        }
    };
    let me = match client.me().await {
        Ok(me) => me,
        Err(error @ crate::transport::zulip::Error::Unauthorized { .. }) => {
            say(
                false,
                crate::transport::zulip::bot::unauthorized(profile, creds, &error).to_string(),
            );
            return findings;
        }
        Err(error) => {
            say(false, format!("cannot reach {}: {error}", creds.site));
            return findings;
        }
    };
    say(
        true,
        format!(
            "signed in to {} as {} (user id {}, {})",
            creds.site, me.full_name, me.user_id, me.email
        ),
    );
    if !me.is_bot {
        say(
            false,
            format!(
                "{} is a person's account, not a bot: create a Generic bot in Zulip's settings and use its zuliprc",
                me.email
            ),
        );
    }
    match client.subscriptions().await {
        Ok(subscriptions) => {
            for channel in profile.required_channels() {
                let found = subscriptions
                    .iter()
                    .any(|s| crate::ground::text::eq_fold(&s.name, &channel));
                if found {
                    say(true, format!("subscribed to #{channel}"));
                } else {
                    say(
                        false,
                        format!(
                            "not subscribed to #{channel}: subscribe {} to it (channel settings → Subscribers), \
                             or remove it from the profile's channels",
                            me.full_name
                        ),
                    );
                }
            }
        }
        Err(error) => say(
            false,
            format!("cannot list the bot's subscriptions: {error}"),
        ),
    }
    if let Some(crate::profile::UserRef::Id(id)) = &profile.eagle.executor_bot {
        match client.user(*id as i64).await {
            Ok(user) if user.is_bot => say(
                true,
                format!("executor bot: {} ({})", user.full_name, user.email),
            ),
            Ok(user) => say(
                false,
                format!("executor_bot {id} is {}, who is not a bot", user.full_name),
            ),
            Err(error) => say(false, format!("executor_bot {id}: {error}")),
        }
    }
    findings
}
