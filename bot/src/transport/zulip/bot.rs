//! The Zulip transport of `eagle run`: one identity's event loop (the
//! [`super::listener`]) and its outbox sender ([`super::sender`]) beside the
//! daemon's loops, and how its posts name people.

use std::sync::Arc;

use anyhow::Context as _;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::client::Client;
use super::listener::{Fatal, Listener, role_listens};
use super::sender::OutboxSender;
use crate::daemon::{Daemon, Transport, Voice};
use crate::profile::{Profile, Role};
use crate::runtime::posts::{People, Poster};
use crate::transport::zulip::zuliprc::ZulipCredentials;

/// What a refusal that retrying cannot fix means, for the person reading it.
pub fn unauthorized(profile: &Profile, creds: &ZulipCredentials, error: &Error) -> anyhow::Error {
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

/// One bot identity on Zulip.
pub struct ZulipTransport {
    profile: Profile,
    creds: ZulipCredentials,
    client: Arc<Client>,
    /// The outbox sender, once listening started.
    sender: Option<(CancellationToken, JoinHandle<Result<(), Error>>)>,
}

impl ZulipTransport {
    /// The transport of `profile`, signing in with `creds`.
    pub fn new(profile: &Profile, creds: ZulipCredentials) -> anyhow::Result<ZulipTransport> {
        let client = Client::new(&creds)
            .with_context(|| format!("profile {}: cannot set up the HTTP client", profile.name))?;
        Ok(ZulipTransport {
            profile: profile.clone(),
            creds,
            client: Arc::new(client),
            sender: None,
        })
    }
}

impl Transport for ZulipTransport {
    /// Posts go out under the profile's own name; Eagle @-mentions its
    /// owner as the server knows them (looked up once, here), the executor
    /// only names them.
    async fn voice(&mut self, profile: &Profile) -> Voice {
        let owner_fallback = match profile.role {
            Role::Orchestrator => owner_mention(&self.creds, profile.owner.as_ref()).await,
            Role::Executor => profile.owner.as_ref().map(ToString::to_string),
        };
        Voice {
            history: Some(Arc::new(super::ZulipHistory {
                client: Arc::clone(&self.client),
            })),
            poster: Poster {
                identity: profile.name.clone(),
                channel: profile.executor_channel.clone(),
            },
            people: People {
                owner_fallback,
                approvers: profile.approvers.clone(),
                naming: Arc::new(super::ZulipNaming),
            },
        }
    }

    /// Signs in, starts the outbox sender, and runs the event loop until
    /// `stop`. A sender that stops on its own found the credentials
    /// refused: then the listener stops too.
    async fn listen(&mut self, daemon: &Daemon, stop: &CancellationToken) -> anyhow::Result<()> {
        let (profile, creds) = (&self.profile, &self.creds);
        let store = &daemon.context().store;
        let mut backoff = crate::ground::backoff::Backoff::new();
        let me = match super::listener::retrying(
            stop,
            &mut backoff,
            super::listener::InFlight::Abandon,
            || self.client.me(),
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
        let instance = daemon.context().instance.clone();
        let (express, lane) = super::sender::express_lane(&profile.name, &instance);
        let express = Arc::new(express);
        let sender = OutboxSender {
            client: Arc::clone(&self.client),
            store: store.clone(),
            identity: profile.name.clone(),
            me: me.user_id,
            instance,
            wake: Arc::clone(&wake),
            express: Arc::clone(&express),
            unsent: std::sync::Mutex::new(std::collections::HashSet::new()),
        };
        // The sender outlives the listener: it delivers what the loops
        // post while they drain, and flushes at the end (`finish`).
        let sender_stop = CancellationToken::new();
        let listen_stop = stop.child_token();
        let task = {
            let (sender_stop, listen_stop) = (sender_stop.clone(), listen_stop.clone());
            tokio::spawn(async move {
                let result = sender.run(lane, sender_stop).await;
                if result.is_err() {
                    listen_stop.cancel();
                }
                result
            })
        };
        self.sender = Some((sender_stop, task));
        // Replies a previous run left undelivered go out now.
        wake.notify_one();
        let mut listener = Listener::new(&self.client, store, profile, me, wake, express);
        match listener.run(&listen_stop).await {
            Err(Fatal::Zulip(error)) => Err(unauthorized(profile, creds, &error)),
            Ok(()) => Ok(()),
        }
    }

    /// Stops the sender, which flushes the outbox first (within its deadline).
    async fn finish(self, _: &Daemon) -> anyhow::Result<()> {
        let Some((stop, task)) = self.sender else {
            return Ok(());
        };
        stop.cancel();
        match task.await {
            Ok(Err(error)) => Err(unauthorized(&self.profile, &self.creds, &error)),
            Ok(Ok(())) => Ok(()),
            Err(join) => anyhow::bail!(
                "profile {}: the outbox sender failed: {join}",
                self.profile.name
            ),
        }
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

/// The owner's mention without a lookup: `@**|26**` by id; an email as it is.
pub fn fallback_mention(owner: &crate::profile::UserRef) -> String {
    match owner {
        crate::profile::UserRef::Id(id) => format!("@**|{id}**"),
        crate::profile::UserRef::Email(email) => email.clone(),
    }
}
