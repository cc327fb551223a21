//! Composing votes: any deny wins, then escalate, then approve; if all
//! abstain (or there are no plugins), a human decides. For filters, any skip
//! wins, with every reason; otherwise keep.

use super::{FilterVerdict, PluginIdentity, Verdict, Vote};
use crate::store::NewAuditEntry;

/// The composed answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Approve,
    Deny,
    Escalate,
}

impl Outcome {
    /// The word people and the audit log see.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Approve => "approve",
            Outcome::Deny => "deny",
            Outcome::Escalate => "escalate",
        }
    }
}

/// The decision on a request, with every vote that led to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    pub reason: String,
    /// The plugin whose vote decided; `None` when nobody decided (all abstained).
    pub decided_by: Option<PluginIdentity>,
    /// Whether the owner must be told (a vote asked for it, or a human must decide).
    pub notify_owner: bool,
    pub votes: Vec<Vote<Verdict>>,
}

/// The decision on a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterDecision {
    pub keep: bool,
    /// Every skipping plugin and its reason.
    pub reasons: Vec<(PluginIdentity, String)>,
    pub votes: Vec<Vote<FilterVerdict>>,
}

impl FilterDecision {
    /// `keep` or `skip`.
    pub fn word(&self) -> &'static str {
        if self.keep { "keep" } else { "skip" }
    }

    /// Every reason, joined.
    pub fn reason(&self) -> String {
        if self.keep {
            "no plugin skipped it".into()
        } else {
            self.reasons
                .iter()
                .map(|(p, r)| format!("{}: {r}", p.name))
                .collect::<Vec<_>>()
                .join("; ")
        }
    }
}

/// Composes request votes.
pub fn decide(votes: Vec<Vote<Verdict>>) -> Decision {
    let notify = votes.iter().any(|v| v.notify_owner);
    let first = |pick: fn(&Verdict) -> Option<&String>| {
        votes
            .iter()
            .find_map(|v| pick(&v.verdict).map(|reason| (v.plugin.clone(), reason.clone())))
    };
    if let Some((plugin, reason)) = first(|v| match v {
        Verdict::Deny(r) => Some(r),
        _ => None,
    }) {
        return Decision {
            outcome: Outcome::Deny,
            reason,
            decided_by: Some(plugin),
            notify_owner: notify,
            votes,
        };
    }
    if let Some((plugin, reason)) = first(|v| match v {
        Verdict::Escalate(r) => Some(r),
        _ => None,
    }) {
        return Decision {
            outcome: Outcome::Escalate,
            reason,
            decided_by: Some(plugin),
            notify_owner: true,
            votes,
        };
    }
    if let Some(vote) = votes.iter().find(|v| v.verdict == Verdict::Approve) {
        return Decision {
            outcome: Outcome::Approve,
            reason: format!("approved by {}", vote.plugin.name),
            decided_by: Some(vote.plugin.clone()),
            notify_owner: notify,
            votes,
        };
    }
    let reason = if votes.is_empty() {
        "no policy plugin is configured, so a human decides".to_string()
    } else {
        "every plugin abstained, so a human decides".to_string()
    };
    Decision {
        outcome: Outcome::Escalate,
        reason,
        decided_by: None,
        notify_owner: true,
        votes,
    }
}

/// Composes filter votes.
pub fn filter(votes: Vec<Vote<FilterVerdict>>) -> FilterDecision {
    let reasons: Vec<(PluginIdentity, String)> = votes
        .iter()
        .filter_map(|v| match &v.verdict {
            FilterVerdict::Skip(reason) => Some((v.plugin.clone(), reason.clone())),
            _ => None,
        })
        .collect();
    FilterDecision {
        keep: reasons.is_empty(),
        reasons,
        votes,
    }
}

fn votes_json<V>(votes: &[Vote<V>], show: impl Fn(&V) -> (String, Option<String>)) -> String {
    let items: Vec<serde_json::Value> = votes
        .iter()
        .map(|vote| {
            let (verdict, reason) = show(&vote.verdict);
            serde_json::json!({
                "plugin": vote.plugin.name,
                "version": vote.plugin.version,
                "sha256": vote.plugin.sha256,
                "source": vote.plugin.source,
                "verdict": verdict,
                "reason": reason,
                "notify_owner": vote.notify_owner,
                "failure": vote.failure.as_ref().map(ToString::to_string),
            })
        })
        .collect();
    serde_json::json!({ "votes": items }).to_string()
}

impl Decision {
    /// The audit-log entry recording this decision about `subject`
    /// (`request:7`): which plugin decided, its version, its content hash,
    /// the reason, and every vote.
    pub fn audit_entry(
        &self,
        subject: &str,
        params_hash: &str,
        source_message_id: Option<i64>,
    ) -> NewAuditEntry {
        NewAuditEntry {
            actor: "policy".into(),
            action: "request.decided".into(),
            subject: subject.into(),
            decision: Some(self.outcome.as_str().into()),
            reason: Some(self.reason.clone()),
            plugin_name: self.decided_by.as_ref().map(|p| p.name.clone()),
            plugin_version: self.decided_by.as_ref().map(|p| p.version.clone()),
            plugin_hash: self.decided_by.as_ref().map(|p| p.sha256.clone()),
            params_hash: Some(params_hash.into()),
            source_message_id,
            detail: Some(votes_json(&self.votes, |v| match v {
                Verdict::Approve => ("approve".into(), None),
                Verdict::Deny(r) => ("deny".into(), Some(r.clone())),
                Verdict::Escalate(r) => ("escalate".into(), Some(r.clone())),
                Verdict::Abstain => ("abstain".into(), None),
            })),
        }
    }
}

impl FilterDecision {
    /// The audit-log entry recording this filter decision about `subject` (`task:12`).
    pub fn audit_entry(&self, subject: &str) -> NewAuditEntry {
        let decided_by = self.reasons.first().map(|(p, _)| p);
        NewAuditEntry {
            actor: "policy".into(),
            action: "task.filtered".into(),
            subject: subject.into(),
            decision: Some(self.word().into()),
            reason: Some(self.reason()),
            plugin_name: decided_by.map(|p| p.name.clone()),
            plugin_version: decided_by.map(|p| p.version.clone()),
            plugin_hash: decided_by.map(|p| p.sha256.clone()),
            detail: Some(votes_json(&self.votes, |v| match v {
                FilterVerdict::Keep => ("keep".into(), None),
                FilterVerdict::Skip(r) => ("skip".into(), Some(r.clone())),
                FilterVerdict::Abstain => ("abstain".into(), None),
            })),
            ..NewAuditEntry::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(name: &str) -> PluginIdentity {
        PluginIdentity {
            name: name.into(),
            version: "1.0.0".into(),
            sha256: format!("{name:0>64}"),
            source: format!("builtin:{name}"),
        }
    }

    fn vote(name: &str, verdict: Verdict) -> Vote<Verdict> {
        Vote {
            plugin: plugin(name),
            verdict,
            notify_owner: false,
            failure: None,
        }
    }

    #[test]
    fn deny_beats_escalate_beats_approve_beats_abstain() {
        let table: Vec<(Vec<Verdict>, Outcome, Option<&str>)> = vec![
            (vec![], Outcome::Escalate, None),
            (
                vec![Verdict::Abstain, Verdict::Abstain],
                Outcome::Escalate,
                None,
            ),
            (
                vec![Verdict::Approve, Verdict::Abstain],
                Outcome::Approve,
                Some("p0"),
            ),
            (
                vec![Verdict::Abstain, Verdict::Approve],
                Outcome::Approve,
                Some("p1"),
            ),
            (
                vec![Verdict::Approve, Verdict::Escalate("?".into())],
                Outcome::Escalate,
                Some("p1"),
            ),
            (
                vec![
                    Verdict::Approve,
                    Verdict::Deny("no".into()),
                    Verdict::Escalate("?".into()),
                ],
                Outcome::Deny,
                Some("p1"),
            ),
            (
                vec![Verdict::Escalate("a".into()), Verdict::Deny("b".into())],
                Outcome::Deny,
                Some("p1"),
            ),
            (
                vec![Verdict::Deny("x".into()), Verdict::Deny("y".into())],
                Outcome::Deny,
                Some("p0"),
            ),
        ];
        for (verdicts, want, by) in table {
            let votes = verdicts
                .iter()
                .enumerate()
                .map(|(i, v)| vote(&format!("p{i}"), v.clone()))
                .collect();
            let decision = decide(votes);
            assert_eq!(decision.outcome, want, "{verdicts:?}");
            assert_eq!(
                decision.decided_by.map(|p| p.name).as_deref(),
                by,
                "{verdicts:?}"
            );
        }
    }

    #[test]
    fn notify_and_reasons_carry_through() {
        let mut denying = vote("d", Verdict::Deny("out of scope".into()));
        denying.notify_owner = true;
        let decision = decide(vec![vote("a", Verdict::Approve), denying]);
        assert!(decision.notify_owner);
        assert_eq!(decision.reason, "out of scope");
        let entry = decision.audit_entry("request:7", "abc", Some(5));
        assert_eq!(entry.decision.as_deref(), Some("deny"));
        assert_eq!(entry.plugin_name.as_deref(), Some("d"));
        assert_eq!(entry.plugin_hash, Some(format!("{:0>64}", "d")));
        let detail: serde_json::Value =
            serde_json::from_str(entry.detail.as_deref().unwrap()).unwrap();
        assert_eq!(detail["votes"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn any_skip_wins_with_every_reason() {
        let f = |name: &str, verdict| Vote {
            plugin: plugin(name),
            verdict,
            notify_owner: false,
            failure: None,
        };
        let kept = filter(vec![
            f("a", FilterVerdict::Keep),
            f("b", FilterVerdict::Abstain),
        ]);
        assert!(kept.keep);
        let skipped = filter(vec![
            f("a", FilterVerdict::Skip("closed".into())),
            f("b", FilterVerdict::Keep),
            f("c", FilterVerdict::Skip("figma".into())),
        ]);
        assert!(!skipped.keep);
        assert_eq!(skipped.reason(), "a: closed; c: figma");
        assert!(filter(vec![]).keep);
    }
}
