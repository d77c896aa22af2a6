//! The archive on both engines: what goes and what stays, tombstones, idempotence, search.

use super::*;
use crate::archive::query::Query;
use crate::ops::archive::Options;

const WEEK: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// Open `task`, claim it as `engineer`, work on it and complete it, all at minute `at`.
fn finish(ws: &Workspace, task: &str, at: i64) {
    ws.pin_clock(t(at));
    open(ws, task, None);
    let eng = a("engineer");
    claim(ws, &eng, "engineer", &id(task), None).unwrap();
    set_status(ws, &eng, &id(task), Status::InProgress, None, None).unwrap();
    check_set(ws, &eng, &id(task), &CheckName::new("tests_passed").unwrap(), true, None).unwrap();
    set_status(ws, &eng, &id(task), Status::Completed, Some("done"), None).unwrap();
}

fn archive(ws: &Workspace, dry_run: bool) -> crate::archive::Report {
    crate::ops::archive::run(
        ws,
        &Options { older_than: Some(WEEK), dry_run, wait: false },
        &mut |_| {},
    )
    .unwrap()
}

on_both_engines! {
    /// Only tasks finished more than the age ago go, whole; everything else stays and works.
    fn only_old_finished_tasks_go(ws) {
        finish(ws, "OLD-1", 0);
        let ticket = ws.engine.peek(&id("OLD-1")).unwrap().unwrap();
        let text = ws.engine.read_message(ticket.location.as_ref().unwrap(), &ticket.rec.message).unwrap();
        finish(ws, "YOUNG-1", 10 * 24 * 60 - 60);
        ws.pin_clock(t(0));
        open(ws, "LIVE-1", None);
        claim(ws, &a("engineer-2"), "engineer", &id("LIVE-1"), None).unwrap();
        ws.pin_clock(t(10 * 24 * 60));
        let dry = archive(ws, true);
        assert_eq!(dry.tasks, 1, "{dry:?}");
        assert!(ws.engine.peek(&id("OLD-1")).unwrap().is_some(), "a dry run changes nothing");
        let r = archive(ws, false);
        assert_eq!(r.tasks, 1, "{r:?}");
        assert!(ws.engine.peek(&id("OLD-1")).unwrap().is_none());
        for stays in ["YOUNG-1", "LIVE-1"] {
            assert!(ws.engine.peek(&id(stays)).unwrap().is_some(), "{stays} must stay");
        }
        let b = ws.engine.archived_bundle(&id("OLD-1")).unwrap().expect("a bundle");
        assert_eq!(b.tombstone.status, "completed");
        let msg = b.files.iter().find(|(o, _)| o.ends_with(&ticket.rec.message)).expect("its ticket");
        assert_eq!(msg.1, text, "byte for byte");
        assert!(b.files.iter().any(|(o, _)| o == "TASKS/OLD-1.status"));
        assert!(b.summary.contains("# OLD-1: implement_feature") && b.summary.contains("tests_passed: passed"), "{}", b.summary);
        assert!(b.events.iter().any(|e| e.event == EventKind::Complete));
        // The board and claims go on.
        let mut rows = Vec::new();
        ws.engine.board(&mut |r| { rows.push(r.task.to_string()); Ok(()) }).unwrap();
        assert_eq!(rows, ["LIVE-1", "YOUNG-1"]);
        open(ws, "NEW-1", None);
        claim_next(ws, &a("engineer"), "engineer", None).unwrap();
        // The id is never used again.
        let mut m = crate::message::Message::new(Format::Circe);
        m.to = Some("all".into());
        m.intent = Some("implement_feature".into());
        m.task_id = Some("OLD-1".into());
        let e = send(ws, &a("coordinator"), m).unwrap_err();
        assert_eq!(e.kind, Kind::Refused, "{e:?}");
        assert!(e.message.contains("archived"), "{}", e.message);
        // A second run finds nothing to do.
        let again = archive(ws, false);
        assert_eq!((again.tasks, again.messages), (0, 0), "{again:?}");
        // Search by task id and by message id.
        let mut hits = Vec::new();
        ws.engine.archive_search(&Query { id: Some("OLD-1".into()), ..Query::default() }, &mut |h| { hits.push(h); Ok(true) }).unwrap();
        assert!(hits.iter().any(|h| h.entry.origin.as_deref() == Some(&format!("LOGS/{}", ticket.rec.message))), "{hits:?}");
        let msg_id = hits.iter().find_map(|h| h.entry.msg_id.clone()).expect("a msg id");
        let mut by_id = 0;
        ws.engine.archive_search(&Query { id: Some(msg_id), ..Query::default() }, &mut |_| { by_id += 1; Ok(true) }).unwrap();
        assert_eq!(by_id, 1);
        // Every event, old and new, read by id across the archive and the hot log.
        let all = crate::ops::archive::events(ws, Cursor::START, 100_000).unwrap();
        let last = ws.engine.last_event_id().unwrap();
        assert_eq!(all.iter().map(|e| e.id).collect::<Vec<_>>(), (1..=last).collect::<Vec<_>>());
    }

    /// Old messages in LOGS that no task names go on their own; those a task still here
    /// names stay however old.
    fn loose_messages_go_by_age(ws) {
        ws.pin_clock(t(0));
        open(ws, "LIVE-2", None);
        let co = a("coordinator");
        for (intent, task) in [("question", None), ("inform", Some("LIVE-2"))] {
            let mut m = crate::message::Message::new(Format::Circe);
            m.to = Some("engineer".into());
            m.intent = Some(intent.into());
            m.task_id = task.map(Into::into);
            send(ws, &co, m).unwrap();
        }
        for name in ws.engine.list_box(&Mailbox::Inbox(a("engineer"))).unwrap() {
            ws.engine.move_message(&Mailbox::Inbox(a("engineer")), &Mailbox::Logs, &name).unwrap();
        }
        ws.pin_clock(t(10 * 24 * 60));
        let r = archive(ws, false);
        assert_eq!((r.tasks, r.messages), (0, 1), "{r:?}");
        let left = ws.engine.list_box(&Mailbox::Logs).unwrap();
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(left[0].contains("_inform_LIVE-2"), "{left:?}");
    }
}
