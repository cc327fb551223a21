//! `post_asana_comment`: exactly the approved words on the run's Asana task,
//! nothing added. Before every POST Eagle looks for a comment by the token's
//! user with those words made since the approval, so a retry, also across a
//! crash between the POST and recording it, posts nothing twice
//! ([`crate::integrations::asana::comments`] says why no marker).

use super::{Carrier, Outcome};
use crate::ground::text::one_line;
use crate::integrations::asana::CommentOutcome;
use crate::policy::effect::Effect;
use crate::store::{Request, Run};

impl Carrier {
    pub(super) async fn comment(&self, request: &Request, run: &Run) -> Outcome {
        let Some(asana) = &self.asana else {
            return Outcome::Refused(
                "Eagle did not post the Asana comment: it has no [asana] configured".into(),
            );
        };
        let Some(task_gid) = run.task_gid.strip_prefix("asana:") else {
            return Outcome::Refused(format!(
                "Eagle did not post the Asana comment: the task of run {} did not come from Asana",
                run.id
            ));
        };
        let text = match Effect::parse(&request.action, &request.body) {
            Ok(Some(Effect::PostAsanaComment { body })) => body,
            Ok(_) => request.body.trim().to_string(),
            Err(why) => {
                return Outcome::Refused(format!("Eagle did not post the Asana comment: {why}"));
            }
        };
        let text = text.as_str();
        if text.is_empty() {
            return Outcome::Refused(
                "Eagle did not post the Asana comment: the request holds no text".into(),
            );
        }
        // What the look for an earlier POST counts from: the approval.
        let since = request.decided_at.unwrap_or(request.created_at);
        match asana.post_comment_once(task_gid, text, since).await {
            Ok(CommentOutcome::Posted { story_gid }) => Outcome::Done(format!(
                "Eagle posted the approved comment on the Asana task (story {story_gid})"
            )),
            Ok(CommentOutcome::Found { story_gid }) => Outcome::Done(format!(
                "The approved comment is on the Asana task (story {story_gid})"
            )),
            Err(error @ crate::integrations::asana::Error::RateLimited { .. }) => {
                Outcome::Later(error.to_string())
            }
            Err(error) if error.is_ambiguous() => Outcome::Later(error.to_string()),
            Err(error) => Outcome::Refused(format!(
                "Eagle did not post the Asana comment: {}",
                one_line(&error.to_string(), 300)
            )),
        }
    }
}
