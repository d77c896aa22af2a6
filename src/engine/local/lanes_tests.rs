//! The `--next` lanes: a busy task is passed over, and a requeued task's old entries are
//! dead for good.

use std::collections::HashSet;

use super::*;
use crate::engine::local::testing::{Root, agent, id};

/// A task another process is claiming right now (its lock held) is passed over; once free,
/// the older task comes next.
#[test]
fn claim_next_skips_a_task_another_process_is_claiming() {
    let (_d, r) = Root::new(&["coordinator", "engineer"]);
    r.open("T0");
    r.open("T1");
    let held = r.eng.store.lock_task(&id("T0")).unwrap();
    let w = agent("engineer");
    let o = crate::ops::claim_next(&r.ws, &w, "engineer", None).unwrap();
    assert_eq!(o.task, id("T1"));
    drop(held);
    let o = crate::ops::claim_next(&r.ws, &w, "engineer", None).unwrap();
    assert_eq!(o.task, id("T0"));
    assert!(crate::ops::claim_next(&r.ws, &w, "engineer", None).is_err());
}

/// Every release re-queues its task; the older entries must be dead for good, or a scan
/// stuck behind a busy task re-reads the whole history (found by the hot race: 8 workers on
/// 4 tasks slowed from ~1,200 to under 200 attempts/s as history grew).
#[test]
fn old_entries_of_a_requeued_task_are_dead() {
    let (_d, r) = Root::new(&["coordinator", "engineer"]);
    r.open("T0");
    for _ in 0..20 {
        r.claim("engineer", "T0");
        r.release("engineer", "T0");
    }
    let store = &r.eng.store;
    let lane = store.lanes().unwrap().pop().unwrap();
    let text = store.lane_read(&lane, 0, usize::MAX).unwrap();
    assert_eq!(text.lines().count(), 21, "one entry per time T0 became new");
    // Another process is busy with T0: the scan finds it busy, and only its newest entry is
    // live, so the head moves past the 20 stale ones.
    let other_claimer = store.lock_task(&id("T0")).unwrap();
    let (free, busy) = head_of(&r.eng, &lane, 1, &HashSet::new()).unwrap();
    drop(other_claimer);
    assert!(free.is_none() && busy.is_some());
    let offset = usize::try_from(store.lane_head(&lane)).unwrap();
    let last_line_start = text.len() - text.lines().last().unwrap().len() - 1;
    assert_eq!(offset, last_line_start, "the head stops at the one live entry");
}

/// A change that makes a task waiting queues it before its commit point. While the change
/// holds the task's lock, its entry (not live yet by the records) is kept for a later look;
/// once the lock is free and the records still say otherwise (the change never committed),
/// the entry is dead and the head moves past it.
#[test]
fn an_entry_queued_before_its_commit_point_waits_for_the_change() {
    let (_d, r) = Root::new(&["coordinator", "engineer"]);
    r.open("T0");
    r.claim("engineer", "T0");
    let store = &r.eng.store;
    let lane = store.lanes().unwrap().pop().unwrap();
    let text = store.read_record(&id("T0"), "status").unwrap().unwrap();
    let mut next = StatusRecord::parse(&id("T0"), &text).unwrap();
    next.status = Status::New;
    next.owner = None;
    next.epoch += 1;
    // A release under way: its lock held, its entry queued, its records not yet written.
    let releasing = store.lock_task(&id("T0")).unwrap();
    push(&r.eng, &next).unwrap();
    let pending_at = store.lane_len(&lane).unwrap() - 1 - {
        let all = store.lane_read(&lane, 0, usize::MAX).unwrap();
        all.lines().last().unwrap().len() as u64
    };
    let (free, busy) = head_of(&r.eng, &lane, 1, &HashSet::new()).unwrap();
    assert!(free.is_none() && busy.is_none());
    assert_eq!(store.lane_head(&lane), pending_at, "kept while the change holds the lock");
    // The change ended without committing: the entry is dead for good.
    drop(releasing);
    let (free, busy) = head_of(&r.eng, &lane, 1, &HashSet::new()).unwrap();
    assert!(free.is_none() && busy.is_none());
    assert_eq!(store.lane_head(&lane), store.lane_len(&lane).unwrap());
}
