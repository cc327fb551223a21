//! REST pagination: `per_page` (default 30, at most 100) and `page`, and the
//! `link` header, present only when there is more than one page.

use crate::common::http::Incoming;
use crate::common::query::{encode_query, last};
use crate::github::state::State;

/// The page a request asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Paging {
    pub page: usize,
    pub per_page: usize,
}

/// Reads `per_page` and `page`. GitHub caps `per_page` at 100 and ignores
/// values it cannot read; the fake does the same and records a violation.
pub(crate) fn paging(state: &mut State, req: &Incoming) -> Paging {
    let mut per_page = 30;
    if let Some(raw) = last(&req.query, "per_page") {
        match raw.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => per_page = n,
            Ok(n) if n > 100 => {
                per_page = 100;
                state.violation(format!(
                    "{}: per_page={n} is over 100 (GitHub caps it)",
                    req.what()
                ));
            }
            _ => state.violation(format!(
                "{}: per_page={raw:?} is not an integer in 1..=100",
                req.what()
            )),
        }
    }
    let mut page = 1;
    if let Some(raw) = last(&req.query, "page") {
        match raw.parse::<usize>() {
            Ok(n) if n >= 1 => page = n,
            _ => state.violation(format!(
                "{}: page={raw:?} is not a positive integer",
                req.what()
            )),
        }
    }
    Paging { page, per_page }
}

/// The items of the requested page.
pub(crate) fn slice<T: Clone>(items: &[T], paging: Paging) -> Vec<T> {
    let start = (paging.page - 1).saturating_mul(paging.per_page);
    items
        .iter()
        .skip(start)
        .take(paging.per_page)
        .cloned()
        .collect()
}

/// The `link` header for a list of `total` items, or `None` for one page.
pub(crate) fn link(base: &str, req: &Incoming, paging: Paging, total: usize) -> Option<String> {
    let last_page = total.div_ceil(paging.per_page).max(1);
    if last_page <= 1 {
        return None;
    }
    let url = |page: usize| {
        let mut query: Vec<(String, String)> = req
            .query
            .iter()
            .filter(|(k, _)| k != "page")
            .cloned()
            .collect();
        query.push(("page".to_owned(), page.to_string()));
        format!("<{base}{}?{}>", req.path, encode_query(&query))
    };
    let mut parts = Vec::new();
    if paging.page > 1 {
        parts.push(format!("{}; rel=\"prev\"", url(paging.page - 1)));
    }
    if paging.page < last_page {
        parts.push(format!("{}; rel=\"next\"", url(paging.page + 1)));
        parts.push(format!("{}; rel=\"last\"", url(last_page)));
    }
    if paging.page > 1 {
        parts.push(format!("{}; rel=\"first\"", url(1)));
    }
    Some(parts.join(", "))
}
