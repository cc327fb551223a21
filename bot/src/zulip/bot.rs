//! `eagle run` and `eagle check` for one profile on Zulip.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::client::Client;
use super::listener::{Fatal, Listener, role_listens};
use super::sender::OutboxSender;
use crate::profile::{Profile, ZulipCredentials};
use crate::store::Store;

/// What a refusal that retrying cannot fix means, for the person reading it.
fn unauthorized(profile: &Profile, creds: &ZulipCredentials, error: &Error) -> anyhow::Error {
    match error {
        Error::Unauthorized { .. } => anyhow::anyhow!(
            "profile {}: {error}; check the key in {} (or ZULIP_API_KEY), and that the bot {} is active",
            profile.name,
            creds.source,
            creds.email
        ),
        _ => anyhow::anyhow!(
            "profile {}: the server keeps refusing a request: {error}; check the profile's settings \
             (channels, all_public_streams) against what the bot {} may do",
            profile.name,
            creds.email
        ),
    }
}

/// Runs one identity until `shutdown`: the event loop and the outbox sender.
/// Returns an error only for what restarting cannot fix (refused credentials).
pub async fn run(
    profile: &Profile,
    creds: &ZulipCredentials,
    store: &Store,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let client = Arc::new(
        Client::new(creds)
            .with_context(|| format!("profile {}: cannot set up the HTTP client", profile.name))?,
    );
    let mut backoff = crate::backoff::Backoff::new();
    let me = match super::listener::retrying(
        &shutdown,
        &mut backoff,
        super::listener::InFlight::Abandon,
        || client.me(),
    )
    .await
    {
        Ok(Some(me)) => me,
        Ok(None) => return Ok(()),
        Err(Fatal::Zulip(error)) => return Err(unauthorized(profile, creds, &error)),
    };
    tracing::info!(
        profile = %profile.name,
        user_id = me.user_id,
        name = %me.full_name,
        listens_to = role_listens(profile),
        "connected to {}",
        creds.site
    );
    let wake = Arc::new(Notify::new());
    let instance = crate::host::instance_name();
    let (express, lane) = super::sender::express_lane(&profile.name, &instance);
    let express = Arc::new(express);
    let sender = OutboxSender {
        client: Arc::clone(&client),
        store: store.clone(),
        identity: profile.name.clone(),
        me: me.user_id,
        instance,
        wake: Arc::clone(&wake),
        retention: profile.zulip.retention,
        express: Arc::clone(&express),
        unsent: std::sync::Mutex::new(std::collections::HashSet::new()),
    };
    // The sender outlives the listener: on shutdown it flushes what the
    // listener's last messages left in the outbox.
    let sender_stop = CancellationToken::new();
    // A sender that stops on its own found the credentials refused: then the
    // listener stops too.
    let listen_stop = shutdown.child_token();
    let sender_task = {
        let (sender_stop, listen_stop) = (sender_stop.clone(), listen_stop.clone());
        tokio::spawn(async move {
            let result = sender.run(lane, sender_stop).await;
            if result.is_err() {
                listen_stop.cancel();
            }
            result
        })
    };
    // Replies a previous run left undelivered go out now.
    wake.notify_one();
    let mut listener = Listener::new(&client, store, profile, me, Arc::clone(&wake), express);
    let listened = listener.run(&listen_stop).await;
    sender_stop.cancel();
    let sent = sender_task.await;
    if let Err(Fatal::Zulip(error)) = listened {
        return Err(unauthorized(profile, creds, &error));
    }
    match sent {
        Ok(Err(error)) => Err(unauthorized(profile, creds, &error)),
        Ok(Ok(())) => Ok(()),
        Err(join) => bail!("profile {}: the outbox sender failed: {join}", profile.name),
    }
}

/// How Eagle @-mentions the profile's owner on this server: `@**Name|id**`,
/// looked up once at start. If the server cannot tell (unreachable, no such
/// user), an id still makes a working mention (`@**|id**`); an email is
/// written as plain text and the failure logged.
pub async fn owner_mention(
    creds: &ZulipCredentials,
    owner: Option<&crate::profile::UserRef>,
) -> Option<String> {
    use crate::profile::UserRef;
    let owner = owner?;
    let client = Client::new(creds).ok();
    let found = match (&client, owner) {
        (Some(client), UserRef::Id(id)) => {
            tokio::time::timeout(std::time::Duration::from_secs(10), client.user(*id as i64)).await
        }
        (Some(client), UserRef::Email(email)) => {
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                client.user_by_email(email),
            )
            .await
        }
        (None, _) => return Some(fallback_mention(owner)),
    };
    match found {
        Ok(Ok(user)) => Some(super::mention(&user.full_name, user.user_id)),
        other => {
            let why = match other {
                Ok(Err(error)) => error.to_string(),
                _ => "no answer in time".into(),
            };
            tracing::warn!(%owner, %why, "cannot look the owner up; escalations name them without a lookup");
            Some(fallback_mention(owner))
        }
    }
}

fn fallback_mention(owner: &crate::profile::UserRef) -> String {
    match owner {
        crate::profile::UserRef::Id(id) => format!("@**|{id}**"),
        crate::profile::UserRef::Email(email) => email.clone(),
    }
}

/// One finding of `eagle check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub ok: bool,
    pub text: String,
}

/// Verifies the credentials against the server and that the bot is
/// subscribed where it must listen; says exactly what to fix.
pub async fn check(profile: &Profile, creds: &ZulipCredentials) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut say = |ok: bool, text: String| findings.push(Finding { ok, text });
    let client = match Client::new(creds) {
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
        Err(error @ Error::Unauthorized { .. }) => {
            say(false, unauthorized(profile, creds, &error).to_string());
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
                    .any(|s| crate::text::eq_fold(&s.name, &channel));
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
    if let Some(crate::profile::UserRef::Id(id)) = &profile.executor_bot {
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
