//! Primary rate limits: one budget for REST (`core`, one request each) and
//! one for GraphQL (points), each with a window that resets, and the
//! `x-ratelimit-*` headers every response carries.
//!
//! GitHub keeps these per user; the fake keeps one budget per resource, as
//! if every token belonged to one user, which is how Eagle runs (one bot
//! token).

use crate::common::clock::unix_now;
use crate::github::model::{RateLimit, Resource};

/// A window of a primary limit.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    pub limit: u64,
    pub used: u64,
    /// UNIX seconds.
    pub reset_at: i64,
    /// 403 or 429 for a refused REST request.
    pub status: u16,
    /// Everything charged since the start, across windows.
    pub spent: u64,
}

impl Budget {
    fn new() -> Budget {
        Budget {
            limit: 5_000,
            used: 0,
            reset_at: unix_now() + 3_600,
            status: 403,
            spent: 0,
        }
    }

    /// What is left in this window.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

/// Both budgets.
#[derive(Debug)]
pub(crate) struct Quotas {
    core: Budget,
    graphql: Budget,
}

impl Quotas {
    /// Fresh budgets of 5,000 an hour, GitHub's default for a user.
    pub fn new() -> Quotas {
        Quotas {
            core: Budget::new(),
            graphql: Budget::new(),
        }
    }

    /// The budget of a resource, after starting a new window if the old one
    /// has reset.
    pub fn budget(&mut self, resource: Resource) -> &mut Budget {
        let budget = match resource {
            Resource::Core => &mut self.core,
            Resource::GraphQl => &mut self.graphql,
        };
        let now = unix_now();
        if now >= budget.reset_at {
            budget.used = 0;
            budget.reset_at = now + 3_600;
        }
        budget
    }

    /// Replaces a budget's window.
    pub fn set(&mut self, resource: Resource, limit: RateLimit) {
        let budget = self.budget(resource);
        budget.limit = limit.limit;
        budget.used = limit.limit.saturating_sub(limit.remaining);
        budget.reset_at = unix_now() + i64::try_from(limit.reset_in.as_secs()).unwrap_or(i64::MAX);
        budget.status = limit.status;
    }

    /// Charges `amount`.
    pub fn charge(&mut self, resource: Resource, amount: u64) {
        let budget = self.budget(resource);
        budget.used = budget.used.saturating_add(amount);
        budget.spent = budget.spent.saturating_add(amount);
    }

    /// Everything charged since the start.
    pub fn spent(&self, resource: Resource) -> u64 {
        match resource {
            Resource::Core => self.core.spent,
            Resource::GraphQl => self.graphql.spent,
        }
    }

    /// The `x-ratelimit-*` headers.
    pub fn headers(&mut self, resource: Resource) -> Vec<(&'static str, String)> {
        let budget = self.budget(resource).clone();
        vec![
            ("x-ratelimit-limit", budget.limit.to_string()),
            ("x-ratelimit-remaining", budget.remaining().to_string()),
            (
                "x-ratelimit-used",
                budget.used.min(budget.limit).to_string(),
            ),
            ("x-ratelimit-reset", budget.reset_at.to_string()),
            ("x-ratelimit-resource", resource.name().to_owned()),
        ]
    }
}
