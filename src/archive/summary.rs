//! A task's story for people (`ARCHIVE/<period>/summaries/<task>.md`), derived from its
//! records, its events and its thread: intent, who opened, claimed, handed on and completed
//! it and when, each check and how it was recorded, the time spent in each status, the
//! thread's summaries, the outcome. Readable without unpacking anything.

use crate::message::one_line_shown;
use std::collections::BTreeMap;

use crate::event::{Event, EventKind};
use crate::task::{Checks, StatusRecord};

/// One message of the task's thread, as the summary shows it.
#[derive(Debug, Clone)]
pub struct ThreadItem {
    pub created_at: String,
    pub from: String,
    pub to: String,
    pub intent: String,
    /// Its headline, or the first line of its `## Summary` section.
    pub summary: String,
}

/// Two RFC 3339 times in time order, whatever their precision (text order puts `…:00.500Z`
/// before `…:00Z`); one that does not read goes first, then by text.
pub fn by_time(a: &str, b: &str) -> std::cmp::Ordering {
    let t = |s: &str| crate::clock::parse(s);
    t(a).cmp(&t(b)).then_with(|| a.cmp(b))
}

/// The later of two RFC 3339 times (`by_time`), as its text.
pub fn later(a: &str, b: &str) -> String {
    if by_time(a, b).is_lt() { b } else { a }.to_string()
}

/// The first line worth showing of a message body: a headline wins, else the first
/// non-empty line under `## Summary`, else the first non-empty line that is not a heading.
pub fn summary_line(headline: Option<&str>, body: &str) -> String {
    crate::message::summary_of(headline, body)
        .map(|s| crate::message::clip(s, 160))
        .unwrap_or_default()
}

fn secs_between(a: &str, b: &str) -> Option<i64> {
    let (a, b) = (crate::clock::parse(a)?, crate::clock::parse(b)?);
    Some((b - a).num_seconds().max(0))
}

/// `3d 4h`, `2h 5m`, `40s`.
pub fn human_duration(secs: i64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs % 86_400 / 3600, secs % 3600 / 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// Seconds spent in each status, from the events' moves (`from` -> `to` at `ts`), up to the
/// task's last change.
pub fn time_in_status(events: &[Event], rec: &StatusRecord) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, String)> = None; // (status, since)
    for e in events {
        let Some(to) = e.to else { continue };
        if let Some((s, since)) = cur.take() {
            *out.entry(s).or_insert(0) += secs_between(&since, &e.ts).unwrap_or(0);
        }
        cur = Some((to.as_str().to_string(), e.ts.clone()));
    }
    if let Some((s, since)) = cur
        && !rec.status.is_terminal()
    {
        *out.entry(s).or_insert(0) += secs_between(&since, &rec.updated_at).unwrap_or(0);
    }
    out
}

/// Text someone wrote (a note, a reason, a command), on one line of the summary: its line
/// breaks written `\n` and its control characters escaped, so that a note can forge no line
/// of the story and carries no terminal escape into the file (`message::one_line_shown`).
fn who_when(e: &Event) -> String {
    format!("{} at {}", e.agent, e.ts)
}

/// How a check event recorded its result: `run by qa at T: `cargo test` exited 0 after 41.5s`.
fn how_recorded(e: &Event) -> String {
    let how = e.how.as_deref().unwrap_or("asserted");
    let mut s = format!("{how} by {}", who_when(e));
    if let Some(cmd) = &e.command {
        s.push_str(&format!(": `{}`", one_line_shown(&cmd.join(" "))));
        if let Some(code) = e.exit_code {
            s.push_str(&format!(" exited {code}"));
        }
        if let Some(secs) = e.seconds {
            s.push_str(&format!(" after {secs:.1}s"));
        }
    }
    s
}

/// The summary's Markdown.
#[expect(clippy::too_many_lines, reason = "one document, section after section")]
pub fn render(
    rec: &StatusRecord,
    checks: &Checks,
    events: &[Event],
    thread: &[ThreadItem],
    archived_at: &str,
) -> String {
    // A task handed on is titled by its last intent, and says which it was opened with.
    let opened_as = events
        .iter()
        .find(|e| e.event == EventKind::Open)
        .and_then(|e| e.intent.as_deref())
        .filter(|i| *i != rec.intent.as_str())
        .map(|i| format!(" (opened as {i})"))
        .unwrap_or_default();
    let mut s = format!("# {}: {}{opened_as}\n\n", rec.task_id, rec.intent);
    let outcome = match rec.note.as_deref() {
        Some(n) => format!("**{}** ({})", rec.status.as_str(), one_line_shown(n)),
        None => format!("**{}**", rec.status.as_str()),
    };
    // An expired task was nobody's doing: its deadline passed.
    let by = match (rec.owner.as_deref(), rec.status) {
        (Some(o), _) => format!(", by {o}"),
        (None, crate::task::Status::Expired) => ", its deadline passed".to_string(),
        (None, _) => String::new(),
    };
    s.push_str(&format!("- outcome: {outcome}{by}\n"));
    s.push_str(&format!(
        "- intent: {}, addressed to {}, priority {}\n",
        rec.intent, rec.to, rec.priority
    ));
    s.push_str(&format!("- opened by {} at {}\n", rec.opened_by, rec.created_at));
    let span = secs_between(&rec.created_at, &rec.updated_at).map(human_duration);
    s.push_str(&format!(
        "- finished at {}{}; claimed {} time(s), {} lease(s) ran out\n",
        rec.updated_at,
        span.map(|d| format!(" ({d} after it was opened)")).unwrap_or_default(),
        rec.attempts,
        rec.expiries
    ));
    s.push_str(&format!("- archived at {archived_at}\n\n## Story\n\n"));
    let mut any = false;
    for e in events {
        let line = match e.event {
            EventKind::Open => format!("opened by {}", who_when(e)),
            EventKind::Claim => format!("claimed by {}", who_when(e)),
            EventKind::Handoff => format!(
                "handed on by {} to {} ({})",
                who_when(e),
                one_line_shown(e.addressed_to.as_deref().unwrap_or("?")),
                one_line_shown(e.intent.as_deref().unwrap_or("?"))
            ),
            EventKind::Release | EventKind::Requeue => format!(
                "{} by {}{}",
                e.event.as_str(),
                who_when(e),
                e.reason.as_deref().map(|r| format!(": {}", one_line_shown(r))).unwrap_or_default()
            ),
            EventKind::Expire | EventKind::Park => format!(
                "{}: the lease of {} ran out (noticed by {})",
                e.event.as_str(),
                e.owner.as_deref().unwrap_or("?"),
                who_when(e)
            ),
            EventKind::Start
            | EventKind::Block
            | EventKind::Unblock
            | EventKind::Complete
            | EventKind::Fail => format!(
                "{} by {}{}",
                e.to.map_or(e.event.as_str(), crate::task::Status::as_str),
                who_when(e),
                e.note.as_deref().map(|n| format!(": {}", one_line_shown(n))).unwrap_or_default()
            ),
            EventKind::Lapse => format!(
                "expired: its deadline passed (noticed by {}){}",
                who_when(e),
                e.note.as_deref().map(|n| format!(": {}", one_line_shown(n))).unwrap_or_default()
            ),
            EventKind::Readdress => format!(
                "readdressed by {} to {}{}",
                who_when(e),
                one_line_shown(e.addressed_to.as_deref().unwrap_or("?")),
                e.reason
                    .as_deref()
                    .map(|r| format!(" ({})", one_line_shown(r)))
                    .unwrap_or_default()
            ),
            EventKind::Repair => {
                format!(
                    "repaired by circe at {}: {}",
                    e.ts,
                    one_line_shown(e.what.as_deref().unwrap_or(""))
                )
            }
            _ => continue,
        };
        any = true;
        s.push_str(&format!("- {line}\n"));
    }
    if !any {
        s.push_str("- (no lifecycle events in the log)\n");
    }
    s.push_str("\n## Checks\n\n");
    let recorded: Vec<&Event> = events.iter().filter(|e| e.event == EventKind::Check).collect();
    if checks.is_empty() && recorded.is_empty() {
        s.push_str("- none required\n");
    }
    let mut latest = Vec::new();
    for (name, passed) in checks {
        s.push_str(&format!("- {name}: {}", if *passed { "passed" } else { "not passed" }));
        match recorded.iter().rposition(|e| e.check.as_deref() == Some(name.as_str())) {
            Some(i) => {
                latest.push(i);
                s.push_str(&format!(", {}", how_recorded(recorded[i])));
            }
            None => s.push_str(" (no check event in the log)"),
        }
        s.push('\n');
    }
    // Results the final checks do not show: before a handoff reset them, or run again since.
    let earlier: Vec<&Event> =
        recorded.iter().enumerate().filter(|(i, _)| !latest.contains(i)).map(|(_, e)| *e).collect();
    if !earlier.is_empty() {
        s.push_str("\nEarlier results (reset by a handoff, or recorded again since):\n\n");
        for e in earlier {
            let result = if e.passed == Some(false) { "failed" } else { "passed" };
            let name = e.check.as_deref().unwrap_or("?");
            s.push_str(&format!("- {name}: {result}, {}\n", how_recorded(e)));
        }
    }
    s.push_str("\n## Time in each status\n\n");
    let times = time_in_status(events, rec);
    if times.is_empty() {
        s.push_str("- (no moves in the log)\n");
    }
    // In the lifecycle's order (new, claimed, in_progress, blocked, ...), not the alphabet's.
    let mut times: Vec<(&String, &i64)> = times.iter().collect();
    let place = |st: &str| {
        crate::task::lifecycle::ALL_STATUSES
            .iter()
            .position(|a| a.as_str() == st)
            .unwrap_or(usize::MAX)
    };
    times.sort_by_key(|(st, _)| place(st));
    for (status, secs) in times {
        s.push_str(&format!("- {status}: {}\n", human_duration(*secs)));
    }
    s.push_str("\n## Thread\n\n");
    if thread.is_empty() {
        s.push_str("- (no messages)\n");
    }
    for m in thread {
        s.push_str(&format!(
            "- {} {} -> {} ({}): {}\n",
            one_line_shown(&m.created_at),
            one_line_shown(&m.from),
            one_line_shown(&m.to),
            one_line_shown(&m.intent),
            one_line_shown(&m.summary)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::TaskId;
    use crate::task::Status;

    fn ev(kind: EventKind, agent: &str, ts: &str, to: Option<Status>) -> Event {
        let mut e = Event::new(kind, agent, ts.into()).task(&TaskId::new("T1").unwrap());
        e.to = to;
        e
    }

    #[test]
    fn the_story_of_a_task() {
        let rec = StatusRecord::parse(
            "T1",
            "task_id: T1\nstatus: completed\nowner: qa\nupdated_at: 2026-01-03T00:00:00Z\ncreated_at: 2026-01-01T00:00:00Z\nintent: test\npriority: high\nto: qa\nopened_by: coordinator\nepoch: 3\nattempts: 2\nmessage: m.md\nnote: all green\n",
        )
        .unwrap();
        let mut check = ev(EventKind::Check, "qa", "2026-01-02T12:00:00Z", None);
        check.check = Some("tests_passed".into());
        check.how = Some("run".into());
        check.command = Some(vec!["cargo".into(), "test".into()]);
        check.exit_code = Some(0);
        check.seconds = Some(41.5);
        let mut handoff =
            ev(EventKind::Handoff, "engineer", "2026-01-02T00:00:00Z", Some(Status::New));
        handoff.addressed_to = Some("qa".into());
        handoff.intent = Some("test".into());
        let mut open =
            ev(EventKind::Open, "coordinator", "2026-01-01T00:00:00Z", Some(Status::New));
        open.intent = Some("implement_feature".into());
        let mut before = ev(EventKind::Check, "engineer", "2026-01-01T12:00:00Z", None);
        before.check = Some("tests_passed".into());
        before.how = Some("asserted".into());
        before.passed = Some(true);
        let events = vec![
            open,
            ev(EventKind::Claim, "engineer", "2026-01-01T01:00:00Z", Some(Status::Claimed)),
            before,
            handoff,
            ev(EventKind::Claim, "qa", "2026-01-02T06:00:00Z", Some(Status::Claimed)),
            check,
            ev(EventKind::Complete, "qa", "2026-01-03T00:00:00Z", Some(Status::Completed)),
        ];
        let mut checks = Checks::new();
        checks.insert(crate::names::CheckName::new("tests_passed").unwrap(), true);
        let thread = vec![ThreadItem {
            created_at: "2026-01-01T00:00:00Z".into(),
            from: "coordinator".into(),
            to: "all".into(),
            intent: "implement_feature".into(),
            summary: summary_line(None, "## Summary\n\nImplement JWT auth\n"),
        }];
        let md = render(&rec, &checks, &events, &thread, "2026-02-01T00:00:00Z");
        for want in [
            "# T1: test (opened as implement_feature)",
            "Earlier results (reset by a handoff, or recorded again since):\n\n- tests_passed: passed, asserted by engineer at 2026-01-01T12:00:00Z\n",
            "outcome: **completed** (all green), by qa",
            "opened by coordinator at 2026-01-01T00:00:00Z",
            "claimed by engineer at 2026-01-01T01:00:00Z",
            "handed on by engineer at 2026-01-02T00:00:00Z to qa (test)",
            "completed by qa at 2026-01-03T00:00:00Z",
            "tests_passed: passed, run by qa at 2026-01-02T12:00:00Z: `cargo test` exited 0 after 41.5s",
            "## Time in each status\n\n- new: 7h 0m\n- claimed: 1d 17h\n",
            "(implement_feature): Implement JWT auth",
        ] {
            assert!(md.contains(want), "missing {want:?} in:\n{md}");
        }
    }

    /// A note (or a reason, a command) holding a line break cannot forge a line of the
    /// story, and one holding a terminal escape does not carry it into the file.
    #[test]
    fn a_note_stays_on_its_line_and_escapes_control_characters() {
        let rec = StatusRecord::parse(
            "T1",
            "task_id: T1\nstatus: completed\nowner: qa\nupdated_at: 2026-01-03T00:00:00Z\ncreated_at: 2026-01-01T00:00:00Z\nintent: test\npriority: high\nto: qa\nopened_by: coordinator\nepoch: 1\nattempts: 1\nmessage: m.md\nnote: \"done\\e]0;HACKED\\a\"\n",
        )
        .unwrap();
        let mut done =
            ev(EventKind::Complete, "qa", "2026-01-03T00:00:00Z", Some(Status::Completed));
        done.note = Some("x\n- completed by coordinator at 2026-01-03T00:00:00Z".into());
        let mut release = ev(EventKind::Release, "qa", "2026-01-02T00:00:00Z", Some(Status::New));
        release.reason = Some("r\u{1b}]0;HACKED\u{7}\u{202e}".into());
        let md = render(&rec, &Checks::new(), &[release, done], &[], "2026-02-01T00:00:00Z");
        assert!(
            md.contains(
                "- completed by qa at 2026-01-03T00:00:00Z: x\\n- completed by coordinator"
            ),
            "{md}"
        );
        assert!(!md.lines().any(|l| l.starts_with("- completed by coordinator")), "{md}");
        assert!(!md.contains(['\u{1b}', '\u{7}', '\u{202e}']), "{md}");
        assert!(md.contains("r\\u{1b}]0;HACKED\\u{7}\\u{202e}"), "{md}");
        assert!(md.contains("(done\\u{1b}]0;HACKED\\u{7})"), "{md}");
    }

    /// A task that expired tells it: the lapse and the readdress are in its story, and its
    /// outcome says no one ended it.
    #[test]
    fn the_story_of_an_expired_task() {
        let rec = StatusRecord::parse(
            "T1",
            "task_id: T1\nstatus: expired\nupdated_at: 2026-01-03T00:00:00Z\ncreated_at: 2026-01-01T00:00:00Z\nintent: test\npriority: normal\nto: agent:qa\nopened_by: coordinator\nepoch: 0\nattempts: 0\nmessage: m.md\n",
        )
        .unwrap();
        let mut readdress = ev(EventKind::Readdress, "coordinator", "2026-01-02T00:00:00Z", None);
        readdress.addressed_to = Some("agent:qa".into());
        readdress.reason = Some("engineer-9 retired".into());
        let events = vec![
            ev(EventKind::Open, "coordinator", "2026-01-01T00:00:00Z", Some(Status::New)),
            readdress,
            ev(EventKind::Lapse, "circe", "2026-01-03T00:00:00Z", Some(Status::Expired)),
        ];
        let md = render(&rec, &Checks::new(), &events, &[], "2026-02-01T00:00:00Z");
        for want in [
            "outcome: **expired**, its deadline passed\n",
            "readdressed by coordinator at 2026-01-02T00:00:00Z to agent:qa (engineer-9 retired)",
            "expired: its deadline passed (noticed by circe at 2026-01-03T00:00:00Z)",
        ] {
            assert!(md.contains(want), "missing {want:?} in:\n{md}");
        }
    }

    #[test]
    fn summary_lines() {
        assert_eq!(summary_line(Some(" Fix it "), "## Summary\nx"), "Fix it");
        assert_eq!(summary_line(None, "## Summary\n\nfirst\nsecond"), "first");
        assert_eq!(summary_line(None, "# Title\n\nbody text"), "body text");
        assert_eq!(summary_line(None, ""), "");
        assert_eq!(summary_line(None, &"x".repeat(500)).chars().count(), 160);
        assert_eq!(human_duration(40), "40s");
        assert_eq!(human_duration(3 * 86_400 + 4 * 3600), "3d 4h");
    }

    #[test]
    fn times_are_ordered_as_times_not_as_text() {
        let (whole, half) = ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.500Z");
        assert!(whole > half, "as text, the whole second sorts after");
        assert!(by_time(whole, half).is_lt());
        assert_eq!(later(whole, half), half);
        assert_eq!(later("", whole), whole);
    }
}
