//! The event log under many writers: 8 processes appending at once. Ids must come out
//! 1, 2, 3, ... in file order: gap-free, no duplicate, none out of order, no torn line.

use std::time::Duration;

use crate::caught::until_caught;
use crate::common::{Root, scaled, spawn_worker, wait_all};

fn events_run(per: usize, env: &[(&str, &str)]) -> Vec<String> {
    let r = Root::new(0);
    let kids: Vec<_> =
        (0..8).map(|_| spawn_worker("events", &[per.to_string()], &r.dir, env)).collect();
    wait_all(kids, Duration::from_secs(300));
    let text = std::fs::read_to_string(r.dir.join("LOGS/events.jsonl")).unwrap_or_default();
    let mut p = Vec::new();
    let mut want = 1u64;
    for line in text.lines() {
        let id =
            serde_json::from_str::<serde_json::Value>(line).ok().and_then(|v| v["id"].as_u64());
        match id {
            // `init` logs nothing, `Root::new(0)` adds agents: their events come first.
            Some(id) if id == want => want += 1,
            Some(id) => {
                p.push(format!("id {id} where {want} was due"));
                want = id + 1;
            }
            None => p.push(format!("not an event line: {line:?}")),
        }
    }
    let total = want - 1;
    let agents = text.lines().filter(|l| l.contains("\"agent_add\"")).count() as u64;
    if p.is_empty() && total != agents + 8 * per as u64 {
        p.push(format!("{total} events, {} expected", agents + 8 * per as u64));
    }
    p
}

#[test]
fn concurrent_appends_are_gap_free() {
    let p = events_run(100, &[]);
    assert!(p.is_empty(), "{} problems: {:?}", p.len(), &p[..p.len().min(20)]);
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn concurrent_appends_are_gap_free_long() {
    let p = events_run(scaled(2_500), &[]);
    assert!(p.is_empty(), "{} problems: {:?}", p.len(), &p[..p.len().min(20)]);
}

/// The checker fails when appenders skip the log's lock.
#[test]
fn events_checker_catches_nolock() {
    let p = until_caught("events checker", 3, Duration::from_secs(120), |_| {
        events_run(100, &[("CIRCE_TEST_BREAK", "events-nolock")])
    });
    assert!(!p.is_empty(), "the checker saw nothing without the log's lock");
    eprintln!("events-nolock caught {} problems, e.g. {:?}", p.len(), &p[..p.len().min(3)]);
}
