//! The archive at full size: a root of N finished tasks (10 messages each, made through the
//! library, not the command line) and 1,000 waiting ones is archived by `circe archive`;
//! every message, record and event that existed before lies exactly once in the hot folders
//! or in the archive (read back with `tar --zstd`), by name or id and checksum; the waiting
//! tasks stay; the board and `claim --next` work; doctor is clean.
//!
//! `CIRCE_ARCHIVE_TASKS` sets N (default 10,000, in the long run; 100,000 is a million
//! messages, whose populating takes hours on a loaded 2-core machine, so RELIABILITY.md
//! records the size each run used).

use std::path::Path;
use std::time::Instant;

use circe::boxes::Mailbox;
use circe::config::Durability;
use circe::engine::RootSpec;
use circe::message::{Format, Message};
use circe::names::{AgentName, CheckName, TaskId};
use circe::task::Status;
use circe::workspace::Workspace;

use super::archive::{LATER, problems, snapshot};
use crate::common::Root;

const T0: &str = "2030-01-01T00:00:00Z";
const LIVE: usize = 1000;

fn agent(s: &str) -> AgentName {
    AgentName::new(s).unwrap()
}

fn task_message(task: &str) -> Message {
    let mut m = Message::new(Format::Circe);
    m.to = Some("all".into());
    m.intent = Some("implement_feature".into());
    m.task_id = Some(task.into());
    m.body = format!("## Summary\nscale task {task}\n");
    m
}

/// `n` finished tasks D0.. (opened, claimed, started, checked, completed, filed, 9 more
/// messages each in LOGS) and LIVE waiting tasks L1.., through the library.
fn populate(root: &Path, n: usize) {
    let ws =
        Workspace::open_with(&RootSpec::Path(root.to_path_buf()), Durability::Relaxed).unwrap();
    ws.pin_clock(circe::clock::parse(T0).unwrap());
    let (co, eng) = (agent("coordinator"), agent("engineer"));
    let passed = CheckName::new("tests_passed").unwrap();
    for i in 0..n {
        let task = format!("D{i}");
        let id = TaskId::new(&task).unwrap();
        circe::ops::send(&ws, &co, task_message(&task)).unwrap();
        circe::ops::claim(&ws, &eng, "engineer", &id, None).unwrap();
        circe::ops::set_status(&ws, &eng, &id, Status::InProgress, None, None).unwrap();
        circe::ops::check_set(&ws, &eng, &id, &passed, true, None).unwrap();
        let done = circe::ops::set_status(&ws, &eng, &id, Status::Completed, None, None).unwrap();
        ws.engine
            .move_message(&Mailbox::Inbox(eng.clone()), &Mailbox::Logs, &done.message)
            .unwrap();
        for k in 2..=10 {
            let mut m = Message::new(Format::Circe);
            m.from = Some("engineer".into());
            m.to = Some("coordinator".into());
            m.intent = Some("inform".into());
            m.task_id = Some(task.clone());
            m.status = Some("new".into());
            m.created_at = circe::clock::parse(T0);
            m.msg_id = Some(format!("{task}-{k}"));
            m.body = format!("## Summary\nnote {k} on {task}\n");
            let name = format!("20300101_000000_engineer-coordinator_inform_{task}.{k}.md");
            let bytes = circe::message::render(&m);
            ws.engine.deliver(bytes.as_bytes(), &name, &[Mailbox::Logs]).unwrap();
        }
        if i % 10_000 == 9_999 {
            eprintln!("  {} finished tasks", i + 1);
        }
    }
    for i in 1..=LIVE {
        circe::ops::send(&ws, &co, task_message(&format!("L{i}"))).unwrap();
    }
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored (CIRCE_ARCHIVE_TASKS=100000 for the full size)"]
fn archive_at_scale() {
    let n: usize = std::env::var("CIRCE_ARCHIVE_TASKS").map_or(10_000, |v| v.parse().unwrap());
    let r = Root::new(1);
    let started = Instant::now();
    populate(&r.dir, n);
    eprintln!("populated {n} finished tasks in {:.0}s", started.elapsed().as_secs_f64());
    let before = snapshot(&r);
    let msgs = before.keys().filter(|k| k.starts_with("msg:")).count();
    let events = before.keys().filter(|k| k.starts_with("ev:")).count();
    assert!(msgs >= n * 10 + LIVE, "{msgs} messages");
    let started = Instant::now();
    let run = r.run_env(None, &["--json", "archive"], &[("CIRCE_NOW", LATER)]);
    assert_eq!(run.code, 0, "{run:?}");
    let archived_s = started.elapsed().as_secs_f64();
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["task_count"], serde_json::json!(n), "{report}");
    let found = problems(&r, &before);
    assert!(found.is_empty(), "{} problems: {:#?}", found.len(), &found[..found.len().min(50)]);
    // Nothing but finished work moved: every waiting task is still waiting.
    for i in 1..=LIVE {
        let s = r.status(&format!("L{i}")).unwrap_or_else(|| panic!("L{i} is gone"));
        assert_eq!(s.status, Status::New, "L{i}");
    }
    assert!(r.status("D0").is_none() && r.status(&format!("D{}", n - 1)).is_none());
    // The board and claims work; doctor is clean.
    let tasks = r.run_env(None, &["--json", "tasks"], &[("CIRCE_NOW", LATER)]);
    assert_eq!(tasks.code, 0, "{tasks:?}");
    assert!(tasks.stdout.contains("\"L1\"") && !tasks.stdout.contains("\"D0\""), "{tasks:?}");
    let claimed =
        r.run_env(Some("engineer"), &["--json", "claim", "--next"], &[("CIRCE_NOW", LATER)]);
    assert_eq!(claimed.code, 0, "{claimed:?}");
    assert!(claimed.stdout.contains("\"L"), "{claimed:?}");
    let (code, v) = r.doctor(false);
    assert_eq!(code, 0, "{v:?}");
    eprintln!(
        "archive at scale: {n} tasks, {msgs} messages, {events} events checked by id and \
         checksum; archive {archived_s:.1}s; 0 lost, 0 duplicated, doctor clean"
    );
}
