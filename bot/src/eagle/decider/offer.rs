//! One message per merge decision: when a run's PR is ready to merge (a
//! worker asks to merge it, or the run completes with CI and the review
//! green), its owner is @-mentioned once, with the PR, its head, CI there,
//! what Eagle will do, and the one command that does it (`!merge N`). The
//! head named is recorded on the run (`merge_offered_sha`): `!merge` merges
//! only that commit, and a second message about the same head (the run's
//! completion after the worker's request, or the other way round) pings
//! nobody. A run that completes with no merge to decide (its PR merged, or
//! a merge approved already) pings nobody either.

use crate::policy::effect::describe_merge;
use crate::store::{Request, RequestStatus, Run, short_sha};

/// What a run's completion or a worker's merge request asks of its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Offer {
    /// Nothing to decide: said without a mention (why, in Eagle's words).
    Nothing(String),
    /// The owner was shown this head already: said without a mention.
    Shown(String),
    /// A merge to decide at this head: the one message, with the mention,
    /// and the head recorded as offered.
    Decide(String),
}

/// What the run's completion asks of its owner, from what the store knows
/// of the run and its requests.
pub(super) fn at_completion(run: &Run, requests: &[Request]) -> Offer {
    let head = run.head_sha.as_deref();
    let going = requests.iter().find(|r| {
        r.action == "merge_pr"
            && r.status == RequestStatus::Approved
            && r.bound_to.is_none()
            && r.carried_out_at.is_none()
            && r.bound_sha.is_some()
            && r.bound_sha.as_deref() == head
    });
    completion(
        run.pr_closed_at.and(run.pr_status.as_deref()),
        head,
        run.merge_offered_sha.as_deref(),
        going.map(|r| r.id),
    )
}

/// [`at_completion`]'s rule: a PR `closed` (merged or not) or a merge
/// approved already (`going`) leaves nothing to decide; a head the owner was
/// shown (`offered`) is not offered again.
fn completion(
    closed: Option<&str>,
    head: Option<&str>,
    offered: Option<&str>,
    going: Option<i64>,
) -> Offer {
    if let Some(status) = closed {
        return Offer::Nothing(format!("its PR is {status}"));
    }
    let Some(head) = head else {
        return Offer::Nothing("Eagle has not seen its PR's head".into());
    };
    if let Some(request) = going {
        return Offer::Nothing(format!(
            "Eagle merges it at {} (req {request}, approved)",
            short_sha(head)
        ));
    }
    shown_or_decide(offered, head)
}

/// What a worker's escalated `merge_pr` asks of the run's owner.
pub(super) fn at_escalation(run: &Run, request: &Request) -> Offer {
    match &request.bound_sha {
        Some(head) => shown_or_decide(run.merge_offered_sha.as_deref(), head),
        // Bound to no head: `!merge` cannot answer it, and approving it
        // merges nothing (its escalation says so).
        None => Offer::Nothing("bound to no head".into()),
    }
}

fn shown_or_decide(offered: Option<&str>, head: &str) -> Offer {
    if offered == Some(head) {
        Offer::Shown(head.to_string())
    } else {
        Offer::Decide(head.to_string())
    }
}

/// The one message of a merge to decide at `head`: the PR and where it
/// comes from, CI and the review there, what Eagle will do, the command.
/// `lead` opens it, with the owner's mention; `asked` is the worker's
/// request it answers too, if any.
pub(super) fn decide_text(
    lead: &str,
    run: &Run,
    head: &str,
    asked: Option<&Request>,
    keep_drafts: bool,
) -> String {
    let id = run.id;
    let review = if run.review_green_sha.as_deref() == Some(head) {
        "Eagle's review there: green"
    } else {
        "Eagle's review there: not done yet"
    };
    let draft = match (run.pr_draft, keep_drafts) {
        (Some(true), false) => " It is a draft: `!merge` marks it ready for review first.",
        (Some(true), true) => {
            " It is a draft, and github.drafts = \"keep\": mark it ready for review on GitHub \
             first, or Eagle will not merge it."
        }
        _ => "",
    };
    let answers = asked
        .map(|r| {
            format!(
                " It answers the worker's request {} too (`!deny {id} {} <reason>` refuses that; \
                 `!show {id} {}` shows it).",
                r.id, r.id, r.id
            )
        })
        .unwrap_or_default();
    format!(
        "{lead} {} {review}.{draft} `!merge {id}` has Eagle \
         merge it at `{}`, once the required checks and a review by someone with write access \
         are green there.{answers}",
        describe_merge(run, Some(head)),
        short_sha(head)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn a_head_is_offered_once_and_only_when_there_is_a_merge_to_decide() {
        let decide = |h: &str| Offer::Decide(h.to_string());
        let cases = [
            // The first time a head is ready: the one message.
            (None, Some(A), None, None, decide(A)),
            // Shown already (the worker's request asked): no second ping.
            (None, Some(A), Some(A), None, Offer::Shown(A.into())),
            // A new head since: offered again.
            (None, Some(B), Some(A), None, decide(B)),
            // Nothing to decide: merged, closed, or a merge approved already.
            (
                Some("merged"),
                Some(A),
                None,
                None,
                Offer::Nothing("its PR is merged".into()),
            ),
            (
                None,
                Some(A),
                None,
                Some(7),
                Offer::Nothing("Eagle merges it at 1111111 (req 7, approved)".into()),
            ),
            (
                None,
                None,
                None,
                None,
                Offer::Nothing("Eagle has not seen its PR's head".into()),
            ),
        ];
        for (closed, head, offered, going, want) in cases {
            assert_eq!(
                completion(closed, head, offered, going),
                want,
                "{closed:?} {head:?} {offered:?} {going:?}"
            );
        }
        assert_eq!(shown_or_decide(Some(A), A), Offer::Shown(A.into()));
        assert_eq!(shown_or_decide(Some(A), B), decide(B));
    }
}
