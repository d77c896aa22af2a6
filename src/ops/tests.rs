//! The operations, run against both engines: every test here runs once on a local root in a
//! temp folder and once on the in-memory engine, and must pass the same way on both.

use chrono::{DateTime, Utc};

use super::*;
use crate::boxes::Mailbox;
use crate::clock;
use crate::config::{Config, DEFAULT_CONFIG};
use crate::engine::RootSpec;
use crate::engine::memory::MemoryEngine;
use crate::error::Kind;
use crate::event::{Cursor, EventKind};
use crate::message::{Format, Message, Priority};
use crate::names::{AgentName, CheckName, TaskId};
use crate::task::Status;
use crate::workspace::Workspace;

const AGENTS: [(&str, &str); 7] = [
    ("coordinator", "coordinator"),
    ("boss", "coordinator"),
    ("engineer", "engineer"),
    ("engineer-2", "engineer"),
    ("qa", "qa"),
    ("rooster", "rooster"),
    ("scribe", "scribe"),
];

fn add_agents(ws: &Workspace) {
    for (a, r) in AGENTS {
        ws.engine.add_agent(&AgentName::new(a).unwrap(), r).unwrap();
    }
}

fn local() -> (Option<tempfile::TempDir>, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let (root, _) = crate::engine::local::init(dir.path(), DEFAULT_CONFIG).unwrap();
    let setup = Workspace::open(&RootSpec::Path(root.clone())).unwrap();
    add_agents(&setup);
    let ws = Workspace::open(&RootSpec::Path(root)).unwrap();
    ws.pin_clock(t(0));
    (Some(dir), ws)
}

fn memory() -> (Option<tempfile::TempDir>, Workspace) {
    let config = Config::parse(DEFAULT_CONFIG).unwrap();
    let setup = Workspace::with_engine(Box::new(MemoryEngine::new()), config.clone()).unwrap();
    add_agents(&setup);
    // The same engine, seen by a fresh workspace (agents loaded anew).
    let ws = Workspace::with_engine(setup.engine, config).unwrap();
    ws.pin_clock(t(0));
    (None, ws)
}

/// 2025-11-21T17:00:00Z plus `min` minutes.
fn t(min: i64) -> DateTime<Utc> {
    clock::parse("2025-11-21T17:00:00Z").unwrap() + chrono::Duration::minutes(min)
}

fn a(name: &str) -> AgentName {
    AgentName::new(name).unwrap()
}

fn id(s: &str) -> TaskId {
    TaskId::new(s).unwrap()
}

fn open(ws: &Workspace, task: &str, priority: Option<Priority>) {
    let mut m = Message::new(Format::Circe);
    m.to = Some("all".into());
    m.intent = Some("implement_feature".into());
    m.task_id = Some(task.into());
    m.priority = priority;
    m.body = format!("## Summary\ndo {task}\n");
    send(ws, &a("coordinator"), m).unwrap();
}

fn kinds(ws: &Workspace) -> Vec<EventKind> {
    ws.engine.read_events(Cursor::START, 10_000).unwrap().iter().map(|e| e.event).collect()
}

macro_rules! on_both_engines {
    ($($(#[$doc:meta])* fn $name:ident($ws:ident) $body:block)*) => {
        $(
            $(#[$doc])*
            mod $name {
                use super::*;
                fn body($ws: &Workspace) $body
                #[test]
                fn local() {
                    let (_dir, ws) = super::local();
                    body(&ws);
                }
                #[test]
                fn memory() {
                    let (_dir, ws) = super::memory();
                    body(&ws);
                }
            }
        )*
    };
}

on_both_engines! {
    /// The reference flow through the operations: open, claim, work, check, hand on, test,
    /// complete; the event log records each step in order with ids 1, 2, 3, ...
    fn reference_flow(ws) {
        open(ws, "AUTH-012", Some(Priority::High));
        let eng = a("engineer");
        let got = claim(ws, &eng, "engineer", &id("AUTH-012"), None).unwrap();
        assert_eq!((got.epoch, got.attempts, got.status), (1, 1, Status::Claimed));
        set_status(ws, &eng, &id("AUTH-012"), Status::InProgress, Some("tests first"), None).unwrap();
        take(ws, &eng, "AUTH-012").unwrap();
        let st = ws.engine.peek(&id("AUTH-012")).unwrap().unwrap();
        assert_eq!(st.location, Some(Mailbox::Workspace(eng.clone())));
        let tp = CheckName::new("tests_passed").unwrap();
        check_set(ws, &eng, &id("AUTH-012"), &tp, true, Some(1)).unwrap();
        // Hand on to QA: the task waits again, with the new message and QA's checks reset.
        let mut to_qa = Message::new(Format::Circe);
        to_qa.to = Some("qa".into());
        to_qa.intent = Some("test".into());
        to_qa.task_id = Some("AUTH-012".into());
        let h = send(ws, &eng, to_qa).unwrap().task.unwrap();
        assert_eq!(h.handoff_from.as_ref(), Some(&eng));
        assert_eq!(h.checks_reset, std::slice::from_ref(&tp));
        assert_eq!(h.record.priority, "high", "priority survives the handoff");
        assert_eq!((h.record.status, h.record.epoch), (Status::New, 2));
        let qa = a("qa");
        claim(ws, &qa, "qa", &id("AUTH-012"), None).unwrap();
        set_status(ws, &qa, &id("AUTH-012"), Status::InProgress, None, None).unwrap();
        let e = set_status(ws, &qa, &id("AUTH-012"), Status::Completed, None, None).unwrap_err();
        assert_eq!(e.kind, Kind::Refused, "QA's own tests_passed is still false");
        check_set(ws, &qa, &id("AUTH-012"), &tp, true, None).unwrap();
        // Step 6: the coordinator completes it and files every message of it.
        let co = a("coordinator");
        let done_rec = set_status(ws, &co, &id("AUTH-012"), Status::Completed, None, None).unwrap();
        assert_eq!(done_rec.status, Status::Completed);
        let filed = done(ws, &co, "AUTH-012").unwrap();
        assert_eq!(filed.len(), 2, "both task messages, from the engineer's and QA's boxes: {filed:?}");
        assert_eq!(ws.engine.list_box(&Mailbox::Logs).unwrap().len(), 2);
        let events = ws.engine.read_events(Cursor::START, 100).unwrap();
        let ids: Vec<u64> = events.iter().map(|e| e.id).collect();
        assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "gap-free ids");
        assert_eq!(
            kinds(ws),
            [
                EventKind::Open,
                EventKind::Claim,
                EventKind::Start,
                EventKind::Take,
                EventKind::Check,
                EventKind::Handoff,
                EventKind::Claim,
                EventKind::Start,
                EventKind::Check,
                EventKind::Complete,
                EventKind::Done,
                EventKind::Done
            ]
        );
        assert_eq!(events[9].agent, "coordinator", "the completion is the coordinator's act");
    }

    /// Two agents race for one task: exactly one wins; the other is told who holds it.
    fn a_lost_claim_names_the_winner(ws) {
        open(ws, "R-1", None);
        claim(ws, &a("engineer"), "engineer", &id("R-1"), None).unwrap();
        let e = claim(ws, &a("engineer-2"), "engineer", &id("R-1"), None).unwrap_err();
        assert_eq!(e.kind, Kind::Conflict);
        assert!(e.details.iter().any(|(k, v)| *k == "owner" && *v == "engineer"));
        let again = claim(ws, &a("engineer"), "engineer", &id("R-1"), None).unwrap();
        assert!(again.already_held, "claiming what you hold changes nothing");
        assert_eq!(kinds(ws), [EventKind::Open, EventKind::Claim]);
    }

    /// `claim --next` takes the best waiting task: priority first, then time waiting; nothing
    /// to take is its own error kind.
    fn claim_next_order(ws) {
        ws.pin_clock(t(0));
        open(ws, "LOW-1", Some(Priority::Low));
        ws.pin_clock(t(1));
        open(ws, "N-1", None);
        ws.pin_clock(t(2));
        open(ws, "HIGH-1", Some(Priority::High));
        ws.pin_clock(t(3));
        open(ws, "N-2", None);
        let e2 = a("engineer-2");
        let got: Vec<String> = (0..4)
            .map(|_| claim_next(ws, &e2, "engineer", None).unwrap().task.to_string())
            .collect();
        assert_eq!(got, ["HIGH-1", "N-1", "N-2", "LOW-1"]);
        let e = claim_next(ws, &e2, "engineer", None).unwrap_err();
        assert_eq!(e.kind, Kind::NothingToClaim);
        // QA may not take implement_feature tasks at all.
        open(ws, "N-3", None);
        assert_eq!(claim_next(ws, &a("qa"), "qa", None).unwrap_err().kind, Kind::NothingToClaim);
    }

    /// A lease that ran out: another agent takes the task over (expire, then claim); the
    /// stale owner is fenced; max_attempts counts expired leases, not claims.
    fn expiry_takeover_and_parking(ws) {
        open(ws, "L-1", None);
        let (e1, e2) = (a("engineer"), a("engineer-2"));
        let ttl = Some(std::time::Duration::from_secs(60));
        // Claimed and released three times: no lease ran out.
        for _ in 0..3 {
            claim(ws, &e1, "engineer", &id("L-1"), ttl).unwrap();
            release(ws, &e1, &id("L-1"), None, false, None).unwrap();
        }
        claim(ws, &e1, "engineer", &id("L-1"), ttl).unwrap();
        ws.pin_clock(t(5));
        let c = claim(ws, &e2, "engineer", &id("L-1"), ttl).unwrap();
        assert_eq!(c.expired_owner.as_deref(), Some("engineer"));
        let st = ws.engine.peek(&id("L-1")).unwrap().unwrap();
        assert_eq!((st.rec.expiries, st.rec.attempts), (1, 5), "one lease ran out in five claims");
        // The old owner is fenced out.
        let e = set_status(ws, &e1, &id("L-1"), Status::InProgress, None, Some(7)).unwrap_err();
        assert_eq!(e.kind, Kind::Conflict);
        // Two more leases run out: the third parks it and escalates to coordinator and rooster.
        ws.pin_clock(t(10));
        claim(ws, &e1, "engineer", &id("L-1"), ttl).unwrap();
        ws.pin_clock(t(15));
        let reaped = reap(ws, "circe").unwrap();
        assert_eq!(reaped, [(id("L-1"), Status::Parked)]);
        assert_eq!(ws.engine.list_box(&Mailbox::Inbox(a("coordinator"))).unwrap().len(), 1);
        assert_eq!(ws.engine.list_box(&Mailbox::Inbox(a("rooster"))).unwrap().len(), 1);
        assert_eq!(
            ws.engine.list_box(&Mailbox::Inbox(a("boss"))).unwrap().len(),
            1,
            "every agent with the coordinator role, not only the one named so"
        );
        assert_eq!(claim(ws, &e2, "engineer", &id("L-1"), None).unwrap_err().kind, Kind::Refused);
        // Only a coordinator, with force, puts it back.
        let co = a("coordinator");
        assert!(release(ws, &co, &id("L-1"), None, false, None).is_err());
        let (r, already) = release(ws, &co, &id("L-1"), Some("retry"), true, None).unwrap();
        assert!(!already);
        assert_eq!((r.status, r.expiries, r.attempts), (Status::New, 0, 0));
    }

    /// Checks are recorded by the holder only; names are checked types.
    fn checks_belong_to_the_holder(ws) {
        open(ws, "C-1", None);
        let tp = CheckName::new("tests_passed").unwrap();
        let e = check_set(ws, &a("engineer"), &id("C-1"), &tp, true, None).unwrap_err();
        assert_eq!(e.kind, Kind::Refused, "nobody holds it");
        claim(ws, &a("engineer"), "engineer", &id("C-1"), None).unwrap();
        let e = check_set(ws, &a("engineer-2"), &id("C-1"), &tp, true, None).unwrap_err();
        assert_eq!(e.kind, Kind::Conflict);
        let r = check_run(ws, &a("engineer"), &id("C-1"), &tp, &["false".into()], None).unwrap();
        assert!(!r.passed);
        assert!(!r.checks[&tp]);
        assert!(CheckName::new("Tests-Passed").is_err());
    }

    /// Unknown tasks: not found, and nothing is created for them.
    fn unknown_tasks_create_nothing(ws) {
        let e = set_status(ws, &a("engineer"), &id("NOPE-1"), Status::InProgress, None, None)
            .unwrap_err();
        assert_eq!(e.kind, Kind::NotFound);
        assert!(ws.engine.task_ids().unwrap().is_empty());
        assert_eq!(kinds(ws), []);
    }

    /// A subscription made before an append sees it (no lost wake-up); with nothing
    /// appended it waits out its timeout.
    fn a_subscription_wakes_on_appends(ws) {
        let short = Some(std::time::Duration::from_millis(50));
        let mut feed = ws.engine.subscribe(None).unwrap();
        assert!(!feed.wait(short).unwrap(), "nothing happened");
        open(ws, "W-1", None);
        assert!(feed.wait(Some(std::time::Duration::from_secs(5))).unwrap(), "the open was seen");
    }

    /// A reader picks up from its cursor: nothing repeated, nothing skipped.
    fn events_read_by_cursor(ws) {
        for i in 0..5 {
            open(ws, &format!("E-{i}"), None);
        }
        let first = ws.engine.read_events(Cursor::START, 2).unwrap();
        assert_eq!(first.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 2]);
        let rest = ws.engine.read_events(Cursor::after(2), 100).unwrap();
        assert_eq!(rest.iter().map(|e| e.id).collect::<Vec<_>>(), [3, 4, 5]);
        assert!(ws.engine.read_events(Cursor::after(5), 100).unwrap().is_empty());
        assert_eq!(ws.engine.last_event_id().unwrap(), 5);
        // Across a rotation the same cursor reads on.
        ws.engine.rotate_events().unwrap();
        open(ws, "E-5", None);
        let after = ws.engine.read_events(Cursor::after(3), 100).unwrap();
        assert_eq!(after.iter().map(|e| e.id).collect::<Vec<_>>(), [4, 5, 6]);
        assert_eq!(ws.engine.last_event_id().unwrap(), 6);
    }
}

#[path = "archive_tests.rs"]
mod archive_tests;

#[path = "seq_tests.rs"]
mod seq_tests;

#[path = "tx_tests.rs"]
mod tx_tests;
