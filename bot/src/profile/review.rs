//! `[runner] review_rules` and `review_checks`: what the pr-review worker
//! is told to review by (the repository's own rule files, read from the
//! run's checkout) and which checks must be green (the profile's, with the
//! required checks of `[github]`).

use super::field::Origins;
use super::{ProfileError, ReviewSettings};

/// The checks a review names when the profile names none: the seed's
/// mandatory macOS UI tests.
pub const DEFAULT_REVIEW_CHECKS: &[&str] = &["macOS UI Tests"];
/// At most this many rule patterns.
const MAX_RULES: usize = 32;

/// Validates the review settings; `required` are `github.required_checks`.
pub(super) fn settings(
    rules: Option<Vec<String>>,
    checks: Option<Vec<String>>,
    required: &[String],
    origins: &Origins,
) -> Result<ReviewSettings, ProfileError> {
    let rules = rules.unwrap_or_default();
    if rules.len() > MAX_RULES {
        return Err(origins.error(
            "runner.review_rules",
            None,
            format!("at most {MAX_RULES} entries"),
        ));
    }
    for rule in &rules {
        let bad = rule.trim().is_empty()
            || rule.starts_with('/')
            || rule.split('/').any(|part| part == "..")
            || rule.contains('\\');
        if bad {
            return Err(origins.error(
                "runner.review_rules",
                None,
                format!(
                    "{rule:?} is not a path inside the checkout (relative, no `..`; `*` and `?` \
                     in its last part)"
                ),
            ));
        }
    }
    let mut all: Vec<String> = checks
        .unwrap_or_else(|| {
            DEFAULT_REVIEW_CHECKS
                .iter()
                .map(|c| c.to_string())
                .collect()
        })
        .into_iter()
        .map(|c| c.trim().to_string())
        .collect();
    if all.iter().any(String::is_empty) {
        return Err(origins.error("runner.review_checks", None, "has an empty name"));
    }
    for check in required {
        if !all.iter().any(|c| c.eq_ignore_ascii_case(check)) {
            all.push(check.clone());
        }
    }
    Ok(ReviewSettings { rules, checks: all })
}
