//! TX message file names: `{mmddhhmmss}-{type}-{from}--{to}-{msgid}.md`, and the older
//! `{mmddhhmmss}-{type}-{from}>{to}-{msgid}.md`. TX's own parser splits on `-` and misreads
//! hyphenated types and names; circe reads the name only for what the front matter leaves
//! out (the front matter wins), knowing TX's types, and writes it for `export tx`.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Utc};

use super::semantics::TX_TYPES;
use crate::message::agent_of;

/// What a TX file name says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxName {
    /// Month, day, hour, minute, second (TX writes no year).
    pub stamp: (u32, u32, u32, u32, u32),
    pub kind: String,
    pub from: String,
    /// The recipient and the msg-id, still joined by `-` (both may hold `-`): see `split`.
    pub to_and_id: String,
    /// `*-orphan.md`: TX's mark for a message whose mesh was gone.
    pub orphan: bool,
}

impl TxName {
    /// `to` and msg-id: knowing the msg-id (from the front matter) splits exactly; else at
    /// the first `-`.
    pub fn split(&self, msg_id: Option<&str>) -> (String, String) {
        if let Some(id) = msg_id
            && let Some(to) = self.to_and_id.strip_suffix(id).and_then(|t| t.strip_suffix('-'))
            && !to.is_empty()
        {
            return (to.to_string(), id.to_string());
        }
        match self.to_and_id.split_once('-') {
            Some((to, id)) => (to.to_string(), id.to_string()),
            None => (self.to_and_id.clone(), String::new()),
        }
    }

    /// The name's time in `year` (UTC), if it is a real date.
    pub fn time_in(&self, year: i32) -> Option<DateTime<Utc>> {
        let (mo, d, h, mi, s) = self.stamp;
        let date = NaiveDate::from_ymd_opt(year, mo, d)?;
        Some(NaiveDateTime::new(date, chrono::NaiveTime::from_hms_opt(h, mi, s)?).and_utc())
    }
}

/// Read a TX file name; `None` when it is not one.
pub fn parse_tx_name(name: &str) -> Option<TxName> {
    let stem = name.strip_suffix(".md")?;
    let (stem, orphan) = match stem.strip_suffix("-orphan") {
        Some(s) => (s, true),
        None => (stem, false),
    };
    let (digits, rest) = stem.split_at_checked(10)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |i: usize| digits[i..i + 2].parse::<u32>().ok();
    let stamp = (num(0)?, num(2)?, num(4)?, num(6)?, num(8)?);
    let rest = rest.strip_prefix('-')?;
    // The longest known type first (`task-complete` before `task`); else the first word.
    let mut types: Vec<&str> = TX_TYPES.to_vec();
    types.sort_by_key(|t| std::cmp::Reverse(t.len()));
    let (kind, rest) = types
        .iter()
        .find_map(|t| rest.strip_prefix(t).and_then(|r| r.strip_prefix('-')).map(|r| (*t, r)))
        .or_else(|| rest.split_once('-'))?;
    let (from, to_and_id) = rest.split_once("--").or_else(|| rest.split_once('>'))?;
    if from.is_empty() || to_and_id.is_empty() {
        return None;
    }
    Some(TxName {
        stamp,
        kind: kind.to_string(),
        from: from.to_string(),
        to_and_id: to_and_id.to_string(),
        orphan,
    })
}

/// The TX file name of a message: its time (UTC), type, sender and recipient (agent parts)
/// and msg-id.
pub fn tx_name(at: DateTime<Utc>, kind: &str, from: &str, to: &str, msg_id: &str) -> String {
    format!(
        "{:02}{:02}{:02}{:02}{:02}-{kind}-{}--{}-{msg_id}.md",
        at.month(),
        at.day(),
        at.format("%H"),
        at.format("%M"),
        at.format("%S"),
        agent_of(from),
        agent_of(to)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_names() {
        let n = parse_tx_name("1102091530-task-complete-brain--core-abc123.md").unwrap();
        assert_eq!(n.kind, "task-complete", "not `task` from `complete-brain` as TX reads it");
        assert_eq!(n.from, "brain");
        assert_eq!(n.split(None), ("core".into(), "abc123".into()));
        assert_eq!(n.stamp, (11, 2, 9, 15, 30));
        let old = parse_tx_name("1102083000-task-core>brain-abc123.md").unwrap();
        assert_eq!((old.kind.as_str(), old.from.as_str()), ("task", "core"));
        assert_eq!(old.split(Some("abc123")), ("brain".into(), "abc123".into()));
        let hy = parse_tx_name("1102083000-ask-code-review--test-echo-ask-brain-001.md").unwrap();
        assert_eq!(hy.from, "code-review");
        assert_eq!(hy.split(Some("ask-brain-001")), ("test-echo".into(), "ask-brain-001".into()));
        assert!(parse_tx_name("1102083000-ask-a--b-x-orphan.md").unwrap().orphan);
        for bad in
            ["x.md", "110208300-ask-a--b-x.md", "1102083000-ask.md", "1102083000ask-a--b-c.md"]
        {
            assert_eq!(parse_tx_name(bad), None, "{bad}");
        }
        assert!(n.time_in(2025).is_some());
        assert!(parse_tx_name("1341083000-ask-a--b-c.md").unwrap().time_in(2025).is_none());
    }

    #[test]
    fn written_names_read_back() {
        let at = crate::clock::parse("2025-11-02T08:30:00Z").unwrap();
        let name = tx_name(at, "task-complete", "code-review/coordinator", "core/core", "c-1");
        assert_eq!(name, "1102083000-task-complete-coordinator--core-c-1.md");
        let n = parse_tx_name(&name).unwrap();
        assert_eq!(n.kind, "task-complete");
        assert_eq!(n.split(Some("c-1")), ("core".into(), "c-1".into()));
        assert_eq!(n.time_in(2025), Some(at));
    }
}
