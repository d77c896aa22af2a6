//! Time and unique ids. `CIRCE_NOW` pins the clock (RFC 3339) so tests and fixtures repeat.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};

/// The current time, or `CIRCE_NOW` when set.
pub fn now() -> DateTime<Utc> {
    if let Ok(pinned) = std::env::var("CIRCE_NOW")
        && let Ok(t) = DateTime::parse_from_rfc3339(&pinned)
    {
        return t.with_timezone(&Utc);
    }
    Utc::now()
}

/// RFC 3339 in UTC with a `Z`, seconds precision unless the time has a fraction.
pub fn format(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// Seconds precision, for records and leases (`2025-11-21T17:00:00Z`).
pub fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Millisecond precision, for the event log.
pub fn stamp_ms(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parse an RFC 3339 / ISO 8601 time; a bare date means midnight UTC.
pub fn parse(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|n| n.and_utc())
}

/// 48 random bits as 8 lowercase base-32 characters (not cryptographic; for uniqueness).
pub fn random_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let mut v = h.finish();
    let alphabet = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut out = String::with_capacity(8);
    for _ in 0..8 {
        out.push(char::from(alphabet[usize::try_from(v & 31).unwrap_or(0)]));
        v >>= 5;
    }
    out
}

/// A unique, time-sortable message id: `YYYYMMDDTHHMMSSmmmZ-xxxxxxxx`.
pub fn new_msg_id(t: DateTime<Utc>) -> String {
    format!("{}-{}", t.format("%Y%m%dT%H%M%S%3fZ"), random_suffix())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_sort_by_time() {
        let t = parse("2025-11-21T17:00:00Z").unwrap();
        let a = new_msg_id(t);
        let b = new_msg_id(t);
        assert_ne!(a, b);
        let later = new_msg_id(parse("2025-11-21T17:00:01Z").unwrap());
        assert!(later > a && later > b);
        assert!(a.starts_with("20251121T170000000Z-"));
    }

    #[test]
    fn parses_dates() {
        assert_eq!(format(parse("2025-10-31").unwrap()), "2025-10-31T00:00:00Z");
        assert_eq!(format(parse("2025-11-02T08:30:00.000Z").unwrap()), "2025-11-02T08:30:00Z");
        assert!(parse("yesterday").is_none());
    }
}
