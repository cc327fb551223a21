//! Injected transport faults: the next N requests on a route get a 502,
//! a 503, a body that is not JSON, a 429, or no answer at all.

use serde_json::json;

use crate::model::{Fault, Route};
use crate::ratelimit::format_secs;

/// What nginx says when Django is down.
const BAD_GATEWAY_HTML: &str = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
const UNAVAILABLE_HTML: &str = "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

const TOO_LARGE_HTML: &str = "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

/// Faults waiting for requests, in the order they were injected.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pending: Vec<(Route, Fault, usize)>,
}

impl Faults {
    /// Adds a fault for the next `times` matching requests.
    pub fn inject(&mut self, route: Route, fault: Fault, times: usize) {
        if times > 0 {
            self.pending.push((route, fault, times));
        }
    }

    /// Takes the fault for a request on `route` (`None` for routes that are
    /// not one of the named ones), if one is pending.
    pub fn take(&mut self, route: Option<Route>) -> Option<Fault> {
        let index = self
            .pending
            .iter()
            .position(|(r, _, _)| *r == Route::Any || Some(*r) == route)?;
        let entry = &mut self.pending[index];
        entry.2 -= 1;
        let fault = entry.1;
        if entry.2 == 0 {
            self.pending.remove(index);
        }
        Some(fault)
    }
}

/// A canned answer: status, content type, body and extra headers.
pub(crate) struct Canned {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub headers: Vec<(&'static str, String)>,
}

/// The answer for a fault that answers at once (not the hanging ones).
pub(crate) fn canned(fault: Fault) -> Option<Canned> {
    let html = |status, body: &str| Canned {
        status,
        content_type: "text/html",
        body: body.to_owned(),
        headers: Vec::new(),
    };
    match fault {
        Fault::Status502Html => Some(html(502, BAD_GATEWAY_HTML)),
        Fault::Status503 => Some(html(503, UNAVAILABLE_HTML)),
        Fault::NotJson => Some(html(
            200,
            "<html><body>Zulip is starting up…</body></html>\n",
        )),
        Fault::RateLimit(secs) => Some(Canned {
            status: 429,
            content_type: "application/json",
            body: json!({
                "result": "error",
                "msg": "API usage exceeded rate limit",
                "code": "RATE_LIMIT_HIT",
                "retry-after": secs,
            })
            .to_string(),
            headers: vec![("retry-after", format_secs(secs))],
        }),
        Fault::Status413Html => Some(html(413, TOO_LARGE_HTML)),
        Fault::BadEventQueue => Some(json_error(json!({
            "result": "error",
            "msg": "Bad event queue ID: injected",
            "code": "BAD_EVENT_QUEUE_ID",
            "queue_id": "injected",
        }))),
        Fault::BadRequest => Some(json_error(json!({
            "result": "error",
            "msg": "Invalid request: injected refusal",
            "code": "BAD_REQUEST",
        }))),
        Fault::Hang | Fault::AcceptThenHang => None,
    }
}

/// A 400 with a Zulip error body.
fn json_error(body: serde_json::Value) -> Canned {
    Canned {
        status: 400,
        content_type: "application/json",
        body: body.to_string(),
        headers: Vec::new(),
    }
}

/// The page a request gets when the server restarts under it.
pub(crate) fn restart_page() -> Canned {
    Canned {
        status: 502,
        content_type: "text/html",
        body: BAD_GATEWAY_HTML.to_owned(),
        headers: Vec::new(),
    }
}
