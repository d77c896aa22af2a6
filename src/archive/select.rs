//! What an archive run takes (PROTOCOLS.md section 17, "What goes"): the rules, pure, so that
//! every engine applies the same ones and a test can go through every case.

use chrono::{DateTime, Utc};

use crate::task::{Status, StatusRecord};

/// Is this task finished long enough to be archived? Only a terminal task (completed, failed
/// or expired) whose last change is older than `cutoff`; a task in any other status is never
/// touched. A record whose time does not read stays.
pub fn task_goes(rec: &StatusRecord, cutoff: DateTime<Utc>) -> bool {
    rec.status.is_terminal() && crate::clock::parse(&rec.updated_at).is_some_and(|t| t < cutoff)
}

/// The period a task is filed under: the month it finished in.
pub fn task_period(rec: &StatusRecord) -> String {
    super::period_of(crate::clock::parse(&rec.updated_at).unwrap_or_default())
}

/// What becomes of a message lying in LOGS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// It belongs to a task that goes now: it goes with it, in the task's bundle.
    WithTask(String),
    /// It belongs to no task that is still here, and is older than the cutoff: it goes on
    /// its own (filed under the month it was written in).
    Loose,
    /// It stays: a task still here names it, or it is too young, or its age is unknown.
    Stays,
}

/// What the run knows about a message in LOGS.
pub struct MessageFacts<'a> {
    /// The task its `task_id` header names (the file name's, when the headers do not read).
    pub task: Option<&'a str>,
    pub created_at: Option<DateTime<Utc>>,
    /// Is it the current message (ticket) of a task that stays?
    pub is_live_ticket: bool,
}

/// Decide a LOGS message's fate. `goes(t)`: task `t` is archived by this run; `stays(t)`: task
/// `t` exists and is not archived by this run (live, or finished too recently).
pub fn message_fate(
    m: &MessageFacts<'_>,
    cutoff: DateTime<Utc>,
    goes: &dyn Fn(&str) -> bool,
    stays: &dyn Fn(&str) -> bool,
) -> Fate {
    if m.is_live_ticket {
        return Fate::Stays;
    }
    match m.task {
        Some(t) if goes(t) => return Fate::WithTask(t.to_string()),
        Some(t) if stays(t) => return Fate::Stays,
        _ => {}
    }
    // No task of this root names it any more (none ever did, or it was archived before).
    match m.created_at {
        Some(c) if c < cutoff => Fate::Loose,
        _ => Fate::Stays,
    }
}

/// What the run knows about a rotated segment of the event log.
pub struct LogFacts {
    pub first: u64,
    pub last: u64,
    /// The newest `ts` among its lines (`None`: none reads).
    pub newest: Option<DateTime<Utc>>,
    /// Does any of its events name a task that stays in TASKS/ after this run?
    pub names_staying_task: bool,
}

/// May a rotated log segment move into the archive? Only when every line is older than the
/// cutoff, every saved cursor has read past it (a cursor is the id of the last event its
/// reader handed on: `after`), and no task that stays has an event in it: the hot log keeps
/// every event of every task still in TASKS/, so a task's bundle is always made whole.
pub fn log_goes(s: &LogFacts, cutoff: DateTime<Utc>, cursors_after: &[u64]) -> bool {
    s.newest.is_some_and(|n| n < cutoff)
        && cursors_after.iter().all(|a| *a >= s.last)
        && !s.names_staying_task
}

/// Is the event log's current file due to be rotated? When its oldest event is older than
/// the cutoff (so a segment of old events can form); a run with nothing old rotates nothing,
/// and a second run changes nothing.
pub fn rotate_due(oldest_in_current: Option<DateTime<Utc>>, cutoff: DateTime<Utc>) -> bool {
    oldest_in_current.is_some_and(|t| t < cutoff)
}

/// Is a segment past retention (`archive.keep`)? Its newest content is older than
/// `keep_until`.
pub fn expired(newest: &str, keep_until: Option<DateTime<Utc>>) -> bool {
    match (keep_until, crate::clock::parse(newest)) {
        (Some(k), Some(n)) => n < k,
        _ => false,
    }
}

/// Statuses a task may have to be archived (the lifecycle's terminal ones).
pub fn terminal_statuses() -> Vec<Status> {
    crate::task::lifecycle::ALL_STATUSES.into_iter().filter(|s| s.is_terminal()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::parse;

    fn rec(status: Status, updated: &str) -> StatusRecord {
        let text = format!(
            "task_id: T1\nstatus: {}\nupdated_at: {updated}\ncreated_at: 2026-01-01T00:00:00Z\nintent: fix_bug\npriority: normal\nto: all\nopened_by: c\nepoch: 1\nattempts: 1\nmessage: m.md\n",
            status.as_str()
        );
        StatusRecord::parse("T1", &text).unwrap()
    }

    #[test]
    fn only_old_terminal_tasks_go() {
        let cutoff = parse("2026-02-01T00:00:00Z").unwrap();
        for s in crate::task::lifecycle::ALL_STATUSES {
            let old = task_goes(&rec(s, "2026-01-15T00:00:00Z"), cutoff);
            assert_eq!(old, s.is_terminal(), "{s:?}");
            assert!(!task_goes(&rec(s, "2026-02-01T00:00:00Z"), cutoff), "{s:?} at the cutoff");
            assert!(!task_goes(&rec(s, "not a time"), cutoff), "{s:?} unreadable time");
        }
        assert_eq!(terminal_statuses(), [Status::Completed, Status::Failed, Status::Expired]);
        assert_eq!(task_period(&rec(Status::Completed, "2026-01-31T23:59:59Z")), "2026-01");
    }

    #[test]
    fn message_fates() {
        let cutoff = parse("2026-02-01T00:00:00Z").unwrap();
        let old = parse("2026-01-01T00:00:00Z");
        let young = parse("2026-03-01T00:00:00Z");
        let goes = |t: &str| t == "GO";
        let stays = |t: &str| t == "LIVE";
        let f = |task: Option<&str>, created_at, is_live_ticket| {
            message_fate(&MessageFacts { task, created_at, is_live_ticket }, cutoff, &goes, &stays)
        };
        // With its task, whatever its own age.
        assert_eq!(f(Some("GO"), young, false), Fate::WithTask("GO".into()));
        // A task that stays names it: never touched, however old.
        assert_eq!(f(Some("LIVE"), old, false), Fate::Stays);
        // Some live task's ticket (whatever its header says) stays.
        assert_eq!(f(None, old, true), Fate::Stays);
        assert_eq!(f(Some("GO"), old, true), Fate::Stays);
        // No task: by its age; an unknown age stays.
        assert_eq!(f(None, old, false), Fate::Loose);
        assert_eq!(f(Some("GONE"), old, false), Fate::Loose);
        assert_eq!(f(None, young, false), Fate::Stays);
        assert_eq!(f(None, None, false), Fate::Stays);
    }

    #[test]
    fn log_segments_and_rotation() {
        let cutoff = parse("2026-02-01T00:00:00Z").unwrap();
        let s = |newest: &str, pinned| LogFacts {
            first: 1,
            last: 100,
            newest: parse(newest),
            names_staying_task: pinned,
        };
        assert!(log_goes(&s("2026-01-01T00:00:00Z", false), cutoff, &[]));
        assert!(log_goes(&s("2026-01-01T00:00:00Z", false), cutoff, &[100, 250]));
        assert!(!log_goes(&s("2026-01-01T00:00:00Z", false), cutoff, &[99]), "a cursor needs it");
        assert!(!log_goes(&s("2026-01-01T00:00:00Z", true), cutoff, &[]), "a task stays");
        assert!(!log_goes(&s("2026-03-01T00:00:00Z", false), cutoff, &[]), "too young");
        assert!(!log_goes(&s("garbage", false), cutoff, &[]));
        assert!(rotate_due(parse("2026-01-01T00:00:00Z"), cutoff));
        assert!(!rotate_due(parse("2026-03-01T00:00:00Z"), cutoff));
        assert!(!rotate_due(None, cutoff));
        assert!(expired("2025-01-01T00:00:00Z", parse("2026-01-01T00:00:00Z")));
        assert!(!expired("2025-01-01T00:00:00Z", None));
        assert!(!expired("2027-01-01T00:00:00Z", parse("2026-01-01T00:00:00Z")));
    }
}
