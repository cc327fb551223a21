//! Time as the fakes see it: wall-clock milliseconds that never repeat, so
//! that "modified_at moves" holds even for two changes in one millisecond,
//! and the timestamp formats both APIs use.

use chrono::{DateTime, SecondsFormat, Utc};

/// A strictly increasing wall clock.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    last_ms: i64,
}

impl Clock {
    /// Now, in UNIX milliseconds, later than any earlier answer.
    pub fn now_ms(&mut self) -> i64 {
        let now = Utc::now().timestamp_millis();
        self.last_ms = now.max(self.last_ms + 1);
        self.last_ms
    }
}

/// Now, in UNIX seconds (for headers such as `x-ratelimit-reset`).
pub(crate) fn unix_now() -> i64 {
    Utc::now().timestamp()
}

fn datetime(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// `2024-06-01T12:00:00Z`, as GitHub writes times.
pub(crate) fn iso_seconds(ms: i64) -> String {
    datetime(ms).to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `2024-06-01T12:00:00.123Z`, as Asana writes times.
pub(crate) fn iso_millis(ms: i64) -> String {
    datetime(ms).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses an ISO-8601 date-time with a zone (`Z` or an offset) into UNIX
/// milliseconds; a bare date means its midnight UTC.
pub(crate) fn parse_iso(text: &str) -> Option<i64> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_millis());
    }
    let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    Some(date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses() {
        let ms = 1_717_243_200_123;
        assert_eq!(iso_seconds(ms), "2024-06-01T12:00:00Z");
        assert_eq!(iso_millis(ms), "2024-06-01T12:00:00.123Z");
        assert_eq!(parse_iso("2024-06-01T12:00:00.123Z"), Some(ms));
        assert_eq!(parse_iso("2024-06-01T14:00:00+02:00"), Some(ms - 123));
        assert_eq!(parse_iso("2024-06-01"), Some(ms - 43_200_123));
        assert_eq!(parse_iso("yesterday"), None);
        let mut clock = Clock::default();
        let a = clock.now_ms();
        assert!(clock.now_ms() > a);
    }
}
