//! Time and unique ids. `CIRCE_NOW` pins the clock (RFC 3339) so tests and fixtures repeat.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};

use crate::error::{Error, Result};

/// The first and the last time RFC 3339 can write (four-digit years): circe computes no
/// time outside them, since it could not read it back.
pub const FIRST: &str = "0000-01-01T00:00:00Z";
pub const LAST: &str = "9999-12-31T23:59:59Z";

/// The current time to the millisecond, or `CIRCE_NOW` when set. Every time circe writes
/// is to the second (records, leases, file names) or to the millisecond (messages, events,
/// the chat), never finer.
pub fn now() -> DateTime<Utc> {
    use chrono::SubsecRound;
    pinned(std::env::var("CIRCE_NOW").ok().as_deref())
        .unwrap_or_else(|| Utc::now().trunc_subsecs(3))
}

/// The time `CIRCE_NOW` pins, if it holds an RFC 3339 time that circe can write.
pub fn pinned(value: Option<&str>) -> Option<DateTime<Utc>> {
    use chrono::SubsecRound;
    value
        .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
        .map(|t| t.with_timezone(&Utc).trunc_subsecs(3))
        .filter(writable)
}

/// Does `t` lie in `FIRST..=LAST`? A time with an offset can lie past them in UTC
/// (`9999-12-31T23:59:59-23:59` is in year 10000), and circe writes every time in UTC.
fn writable(t: &DateTime<Utc>) -> bool {
    use chrono::Datelike;
    (0..=9999).contains(&t.year())
}

/// `t + d`, or an error when the sum lies outside `FIRST..=LAST` (or past what chrono can
/// hold). The one way circe adds to a time: it never panics.
pub fn add_checked(t: DateTime<Utc>, d: std::time::Duration) -> Result<DateTime<Utc>> {
    let first = parse(FIRST).unwrap_or(DateTime::<Utc>::MIN_UTC);
    let last = parse(LAST).unwrap_or(DateTime::<Utc>::MAX_UTC);
    chrono::TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .filter(|end| (first..=last).contains(end))
        .ok_or_else(|| {
            Error::internal(format!(
                "{} plus {}s is outside {FIRST} to {LAST}, the times circe can write",
                format(t),
                d.as_secs()
            ))
            .hint("check the system clock (and CIRCE_NOW, if set)")
        })
}

/// When a lease of `ttl` taken at `now` ends, as a record stamp: rounded up to the second,
/// so a lease is never shorter than its `ttl`.
pub fn lease_until(now: DateTime<Utc>, ttl: std::time::Duration) -> Result<String> {
    lease_end(now, ttl).map(stamp)
}

/// When a lease of `ttl` taken at `now` ends, rounded up to the second (a record holds
/// seconds): never before `now + ttl`.
pub fn lease_end(now: DateTime<Utc>, ttl: std::time::Duration) -> Result<DateTime<Utc>> {
    use chrono::{SubsecRound, Timelike};
    let end = add_checked(now, ttl)?;
    if end.nanosecond() == 0 {
        return Ok(end);
    }
    add_checked(end.trunc_subsecs(0), std::time::Duration::from_secs(1))
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

/// Parse an RFC 3339 / ISO 8601 time; a bare date means midnight UTC. A time that lies
/// outside `FIRST..=LAST` once in UTC is none: circe could not write it back.
pub fn parse(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc)).filter(writable);
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
    fn a_time_whose_offset_takes_it_past_the_writable_years_is_none() {
        for s in ["9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+00:01"] {
            assert_eq!(parse(s), None, "{s}");
            assert_eq!(pinned(Some(s)), None, "{s}");
        }
        for s in ["9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "9999-12-31T23:00:00-00:59"] {
            let t = parse(s).unwrap();
            assert_eq!(parse(&format(t)), Some(t), "{s} is written back as it reads");
        }
    }

    #[test]
    fn add_checked_stops_at_the_last_writable_second() {
        let t = parse("2025-11-21T17:00:00Z").unwrap();
        let year = std::time::Duration::from_secs(365 * 86_400);
        assert_eq!(lease_until(t, year).unwrap(), "2026-11-21T17:00:00Z");
        let last = parse(LAST).unwrap();
        assert_eq!(add_checked(last, std::time::Duration::ZERO).unwrap(), last);
        let e = add_checked(last, std::time::Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::Internal);
        assert!(e.message.contains(LAST) && e.hint.is_some(), "{e:?}");
        assert!(add_checked(DateTime::<Utc>::MAX_UTC, std::time::Duration::MAX).is_err());
        assert!(add_checked(DateTime::<Utc>::MIN_UTC, std::time::Duration::MAX).is_err());
        assert!(add_checked(DateTime::<Utc>::MIN_UTC, year).is_err());
        let first = parse(FIRST).unwrap();
        assert_eq!(add_checked(first, year).unwrap().timestamp() - first.timestamp(), 31_536_000);
    }

    /// Times across chrono's whole range (and its two ends), any duration.
    fn any_time() -> impl proptest::strategy::Strategy<Value = DateTime<Utc>> {
        use proptest::prelude::*;
        let (lo, hi) = (DateTime::<Utc>::MIN_UTC.timestamp(), DateTime::<Utc>::MAX_UTC.timestamp());
        prop_oneof![
            Just(DateTime::<Utc>::MIN_UTC),
            Just(DateTime::<Utc>::MAX_UTC),
            (lo..=hi).prop_map(|s| DateTime::from_timestamp(s, 0).unwrap_or_default()),
            (253_402_300_799 - 400 * 86_400..=253_402_300_799i64)
                .prop_map(|s| DateTime::from_timestamp(s, 0).unwrap_or_default()),
        ]
    }

    proptest::proptest! {
        #[test]
        fn adding_a_duration_never_panics(
            t in any_time(),
            secs in proptest::prop_oneof![0..=400 * 86_400u64, proptest::num::u64::ANY],
        ) {
            let d = std::time::Duration::from_secs(secs);
            let (first, last) = (parse(FIRST).unwrap(), parse(LAST).unwrap());
            match add_checked(t, d) {
                Ok(end) => {
                    proptest::prop_assert!(first <= end && end <= last);
                    proptest::prop_assert_eq!(end.timestamp() - t.timestamp(), i64::try_from(secs).unwrap());
                    proptest::prop_assert_eq!(parse(&stamp(end)), Some(end));
                }
                Err(_) => proptest::prop_assert!(
                    t.timestamp()
                        .checked_add_unsigned(secs)
                        .is_none_or(|s| s < first.timestamp() || s > last.timestamp())
                ),
            }
        }

        /// `CIRCE_NOW` values near both ends of what RFC 3339 writes, with offsets that
        /// push them past it: reading the clock and taking a lease never panic.
        #[test]
        fn a_pinned_clock_near_the_limits_never_panics(
            year in proptest::prop_oneof![0..=2u32, 9997..=9999u32],
            day in 1..=31u32,
            hh in 0..=23u32,
            off in proptest::option::of(-1439..=1439i32),
            secs in 0..=400 * 86_400u64,
        ) {
            let zone = off.map_or_else(|| "Z".to_string(), |o| {
                format!("{}{:02}:{:02}", if o < 0 { '-' } else { '+' }, o.abs() / 60, o.abs() % 60)
            });
            let text = format!("{year:04}-12-{day:02}T{hh:02}:59:59{zone}");
            if let Some(now) = pinned(Some(&text)) {
                let _ = lease_until(now, std::time::Duration::from_secs(secs));
                let _ = (stamp(now), stamp_ms(now), new_msg_id(now));
            }
        }
    }

    #[test]
    fn parses_dates() {
        assert_eq!(format(parse("2025-10-31").unwrap()), "2025-10-31T00:00:00Z");
        assert_eq!(format(parse("2025-11-02T08:30:00.000Z").unwrap()), "2025-11-02T08:30:00Z");
        assert!(parse("yesterday").is_none());
    }
}
