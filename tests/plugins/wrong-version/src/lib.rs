//! Built against eagle:policy@0.2.0, which this host does not support.
wit_bindgen::generate!({ path: "wit", world: "plugin" });
use eagle::policy::types::Verdict;
use exports::eagle::policy::policy::{Decision, FilterVerdict, Guest, Metadata, Request, Task};
struct Future;
impl Guest for Future {
    fn describe() -> Metadata {
        Metadata {
            name: "wrong-version".into(),
            version: "0.1.0".into(),
            description: "built for a newer interface".into(),
            decides_requests: true,
            filters_tasks: false,
        }
    }
    fn decide(_: String, _: Request) -> Decision {
        Decision {
            verdict: Verdict::Approve,
            notify_owner: false,
        }
    }
    fn filter(_: String, _: Task) -> FilterVerdict {
        FilterVerdict::Abstain
    }
}
export!(Future);
