//! Time and unique ids. `CIRCE_NOW` pins the clock (RFC 3339) so tests and fixtures repeat.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Datelike, SecondsFormat, Utc};

/// The current time, or `CIRCE_NOW` when set.
pub fn now() -> DateTime<Utc> {
    if let Ok(pinned) = std::env::var("CIRCE_NOW")
        && let Ok(t) = DateTime::parse_from_rfc3339(&pinned)
    {
        return t.with_timezone(&Utc);
    }
    Utc::now()
}

/// `t + d`, or a refusal when that lies beyond what circe can write down (never a panic).
pub fn after(t: DateTime<Utc>, d: std::time::Duration) -> crate::error::Result<DateTime<Utc>> {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .filter(|end| end.year_ce().1 <= 9999)
        .ok_or_else(|| {
            crate::error::Error::refused(format!(
                "{}s after {} is past the year 9999",
                d.as_secs(),
                stamp(t)
            ))
            .hint("use a shorter duration")
        })
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

/// Seconds since the epoch of an RFC 3339 time. `YYYY-MM-DDTHH:MM:SSZ` (what circe writes)
/// is read without allocating; anything else goes through `parse`.
pub fn epoch_secs(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let fixed = b.len() == 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z';
    if !fixed {
        return parse(text).map(|t| t.timestamp());
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        b[r].iter()
            .try_fold(0i64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0')))
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from civil (proleptic Gregorian), after H. Hinnant's algorithm.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
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
    fn epoch_secs_agrees_with_chrono() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2000-02-29T23:59:59Z",
            "2025-11-21T17:00:00Z",
            "2100-03-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(epoch_secs(s), parse(s).map(|t| t.timestamp()), "{s}");
        }
        assert_eq!(
            epoch_secs("2025-11-21T17:00:00.5Z"),
            parse("2025-11-21T17:00:00.5Z").map(|t| t.timestamp())
        );
        assert_eq!(epoch_secs("2025-13-21T17:00:00Z"), None);
        assert_eq!(epoch_secs("soon"), None);
    }

    #[test]
    fn parses_dates() {
        assert_eq!(format(parse("2025-10-31").unwrap()), "2025-10-31T00:00:00Z");
        assert_eq!(format(parse("2025-11-02T08:30:00.000Z").unwrap()), "2025-11-02T08:30:00Z");
        assert!(parse("yesterday").is_none());
    }
}
