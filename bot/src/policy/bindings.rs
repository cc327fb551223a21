//! The generated bindings of `wit/policy.wit`, and the conversions between
//! them and Eagle's own types. Nothing outside `policy` sees these types.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin",
});

use self::eagle::policy::types as wit;
use super::{FilterVerdict, PolicyRequest, PolicyTask, RequestKind, Verdict};

pub use self::eagle::policy::host::{Host, Level};
pub use self::eagle::policy::types::{Host as TypesHost, Metadata};

impl From<&PolicyTask> for wit::Task {
    fn from(task: &PolicyTask) -> Self {
        wit::Task {
            gid: task.gid.clone(),
            source: task.source.clone(),
            title: task.title.clone(),
            description: task.description.clone(),
            notes: task.notes.clone(),
            links: task.links.clone(),
            tags: task.tags.clone(),
            platform: task.platform.clone(),
            assignee: task.assignee.clone(),
            state: if task.closed {
                wit::TaskState::Closed
            } else {
                wit::TaskState::Open
            },
        }
    }
}

impl From<&PolicyRequest> for wit::Request {
    fn from(request: &PolicyRequest) -> Self {
        wit::Request {
            kind: match request.kind {
                RequestKind::Request => wit::RequestKind::Request,
                RequestKind::Escalate => wit::RequestKind::Escalate,
            },
            action: request.action.clone(),
            run_id: request.run_id,
            request_id: request.request_id,
            body: request.body.clone(),
            task: request.task.as_ref().map(wit::Task::from),
            requested_by: request.requested_by.clone(),
        }
    }
}

impl From<wit::Verdict> for Verdict {
    fn from(verdict: wit::Verdict) -> Self {
        match verdict {
            wit::Verdict::Approve => Verdict::Approve,
            wit::Verdict::Deny(reason) => Verdict::Deny(reason),
            wit::Verdict::Escalate(reason) => Verdict::Escalate(reason),
            wit::Verdict::Abstain => Verdict::Abstain,
        }
    }
}

impl From<wit::FilterVerdict> for FilterVerdict {
    fn from(verdict: wit::FilterVerdict) -> Self {
        match verdict {
            wit::FilterVerdict::Keep => FilterVerdict::Keep,
            wit::FilterVerdict::Skip(reason) => FilterVerdict::Skip(reason),
            wit::FilterVerdict::Abstain => FilterVerdict::Abstain,
        }
    }
}
