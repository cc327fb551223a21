//! `comment_on_pr` and `reply_thread`: the approved text, posted once on
//! the run's PR (or in one of its review threads), with a marker (an HTML
//! comment GitHub does not show) that is looked for before every POST: a
//! crash between the POST and recording it finds the comment instead of
//! posting it again. A `reply_thread` answer is what the PR loop reads as
//! `[ACKNOWLEDGED: …]` (trusted because Eagle's own login posted it).

use super::pr::github_error;
use super::{Carrier, Outcome};
use crate::ground::text::one_line;
use crate::integrations::github::{head_is_in, head_label};
use crate::policy::effect::{Carried, Effect};
use crate::store::{Request, Run};

impl Carrier {
    pub(super) async fn comment_on_github(&self, request: &Request, run: &Run) -> Outcome {
        let Some((client, settings)) = &self.github else {
            return Outcome::Refused("Eagle did not comment: it has no [github] configured".into());
        };
        let effect = match Effect::parse(&request.action, &request.body) {
            Ok(Some(effect)) => effect,
            Ok(None) => return Outcome::Refused("Eagle did not comment: no text".into()),
            Err(why) => return Outcome::Refused(format!("Eagle did not comment: {why}")),
        };
        let Some(number) = run.pr_number.filter(|n| *n > 0).map(|n| n as u64) else {
            return Outcome::Refused(format!(
                "Eagle did not comment: run {} has no PR yet",
                run.id
            ));
        };
        let repo = match self.repo_of(settings, run).await {
            Ok((repo, _)) => repo,
            Err(why) => return Outcome::Refused(format!("Eagle did not comment: {why}")),
        };
        // Only on the run's own PR: a worker may have named a fork's PR that
        // borrows the run's branch name (the PR loop holds such a run, but
        // the number stays recorded).
        match client.pull_request(&repo, number).await {
            Ok(pull) => {
                let branch = run
                    .branch_name
                    .clone()
                    .unwrap_or_else(|| format!("eagle/run-{}", run.id));
                if !head_is_in(&pull, &repo) || pull.head_ref != branch {
                    return Outcome::Refused(format!(
                        "Eagle did not comment on PR #{number}: its head is {}, not the run's \
                         branch {branch} of {}; Eagle comments only on the run's own PR",
                        one_line(&head_label(&pull), 200),
                        repo
                    ));
                }
            }
            Err(error) => return github_error("comment", &error),
        }
        let marker = marker(run.id, request.id);
        let posted = |url: String, found: bool| {
            Outcome::Carried(
                if found {
                    format!("The approved comment is on PR #{number} already: {url}")
                } else {
                    format!("Eagle posted the approved comment on PR #{number}: {url}")
                },
                Carried {
                    pr_number: Some(number),
                    url: Some(url),
                    ..Carried::default()
                },
            )
        };
        match effect {
            Effect::CommentOnPr { body } => {
                match client.issue_comments(&repo, number, None).await {
                    Ok(comments) => {
                        if let Some(c) = comments.iter().find(|c| c.body.contains(&marker)) {
                            return posted(c.html_url.clone(), true);
                        }
                    }
                    Err(error) => return github_error("comment", &error),
                }
                let text = format!("{body}\n\n{marker}");
                match client.create_issue_comment(&repo, number, &text).await {
                    Ok(comment) => posted(comment.html_url, false),
                    Err(error) => github_error("comment", &error),
                }
            }
            Effect::ReplyThread { thread, body } => {
                // Only a thread of the run's own PR.
                match client.review_threads(&repo, number).await {
                    Ok(threads) if threads.threads.iter().any(|t| t.id == thread) => {}
                    Ok(_) => {
                        return Outcome::Refused(format!(
                            "Eagle did not reply: {thread} is not a review thread of PR #{number}"
                        ));
                    }
                    Err(error) => return github_error("reply", &error),
                }
                match client.thread_comments(&thread).await {
                    Ok(comments) => {
                        if let Some(c) = comments.iter().find(|c| c.body.contains(&marker)) {
                            return posted(c.url.clone(), true);
                        }
                    }
                    Err(error) => return github_error("reply", &error),
                }
                let text = format!("{body}\n\n{marker}");
                match client.reply_to_thread(&thread, &text).await {
                    Ok(reply) => posted(reply.url, false),
                    Err(error) => github_error("reply", &error),
                }
            }
            _ => Outcome::Refused("Eagle did not comment: not a comment".into()),
        }
    }
}

/// The marker of one request's comment: invisible on GitHub, unique per
/// run and request.
pub(super) fn marker(run: i64, request: i64) -> String {
    format!("<!-- eagle:run-{run}-req-{request} -->")
}
