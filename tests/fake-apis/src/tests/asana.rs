//! An Asana client for the self-tests and a small world.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::{Answer, http, send};
use crate::{CustomField, FakeAsana, TaskSpec};

/// A client that sends what Eagle must send.
pub(crate) struct As {
    http: reqwest::Client,
    base: String,
    pub headers: Vec<(&'static str, String)>,
}

impl As {
    /// A client with this PAT.
    pub fn new(fake: &FakeAsana, token: &str) -> As {
        As {
            http: http(),
            base: fake.url(),
            headers: vec![
                ("authorization", format!("Bearer {token}")),
                ("user-agent", "eagle-test/0.1".to_owned()),
            ],
        }
    }

    /// The same client without one header.
    pub fn without(&self, name: &str) -> As {
        let mut headers = self.headers.clone();
        headers.retain(|(n, _)| *n != name);
        As {
            http: self.http.clone(),
            base: self.base.clone(),
            headers,
        }
    }

    /// The same client with a header set.
    pub fn with(&self, name: &'static str, value: &str) -> As {
        let mut client = self.without(name);
        client.headers.push((name, value.to_owned()));
        client
    }

    /// Sends a request, with an optional timeout.
    pub async fn try_call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        timeout: Option<Duration>,
    ) -> Result<Answer, reqwest::Error> {
        let url = format!("{}{path}", self.base);
        send(
            &self.http,
            method,
            &url,
            &self.headers,
            body.as_ref(),
            timeout,
        )
        .await
    }

    /// `GET`.
    pub async fn get(&self, path: &str) -> Answer {
        self.try_call(Method::GET, path, None, None)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// `POST` with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.try_call(Method::POST, path, Some(body), None)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }
}

/// The world of the Asana tests.
pub(crate) struct World {
    pub fake: FakeAsana,
    /// Eagle's user, whose PAT `client` holds.
    pub eagle: String,
    pub alex: String,
    /// A premium workspace.
    pub ws: String,
    /// A free workspace.
    pub free: String,
    pub project: String,
    pub inbox: String,
    pub doing: String,
    /// Assigned to Eagle, in Inbox, with notes, a custom field, a tag and a follower.
    pub t1: String,
    /// Completed, in Doing.
    pub t2: String,
    /// A subtask of t1, assigned to Alex.
    pub t3: String,
    pub client: As,
}

/// Builds the world.
pub(crate) async fn world() -> World {
    let fake = FakeAsana::start().await;
    let ws = fake.add_workspace("Acme", true);
    let free = fake.add_workspace("Side project", false);
    let eagle = fake.add_user("Eagle", "eagle@example.com", &[&ws, &free]);
    let alex = fake.add_user("Alex", "alex@example.com", &[&ws]);
    let token = fake.create_pat(&eagle);
    let project = fake.add_project(&ws, "O-L Backlog (Desktop Browsers)");
    let inbox = fake.add_section(&project, "Inbox");
    let doing = fake.add_section(&project, "Doing");
    let mut spec = TaskSpec::new(&ws, "Tab preview stuck");
    spec.notes = "Steps: open <two> tabs & hover".to_owned();
    spec.assignee = Some(eagle.clone());
    spec.memberships = vec![(project.clone(), Some(inbox.clone()))];
    spec.tags = vec!["bug".to_owned()];
    spec.custom_fields = vec![CustomField::new("Platform", "macOS")];
    spec.followers = vec![alex.clone()];
    spec.created_by = Some(alex.clone());
    let t1 = fake.add_task(spec);
    let mut done = TaskSpec::new(&ws, "Figma mock");
    done.memberships = vec![(project.clone(), Some(doing.clone()))];
    done.completed = true;
    let t2 = fake.add_task(done);
    let mut sub = TaskSpec::new(&ws, "Sub");
    sub.parent = Some(t1.clone());
    sub.assignee = Some(alex.clone());
    let t3 = fake.add_task(sub);
    let client = As::new(&fake, &token);
    World {
        fake,
        eagle,
        alex,
        ws,
        free,
        project,
        inbox,
        doing,
        t1,
        t2,
        t3,
        client,
    }
}
