//! The board index follows every change, and is read back right after a crash.

use super::*;
use crate::engine::local::testing::{Root, id};

fn root() -> (tempfile::TempDir, Root) {
    Root::new(&["coordinator", "engineer"])
}

fn open(r: &Root, task: &str) {
    r.open(task);
}

/// The board as the records say it is.
fn truth(r: &Root) -> Vec<(String, Status, Option<String>, usize)> {
    r.eng
        .store
        .list_tasks()
        .unwrap()
        .into_iter()
        .filter_map(|t| match read_row(&r.eng, &t).unwrap() {
            Some(Entry::Row(r)) => Some(r),
            _ => None,
        })
        .map(|r| (r.task.into_owned(), r.status, r.owner.map(Cow::into_owned), r.checks_passed))
        .collect()
}

fn board(r: &Root) -> Vec<(String, Status, Option<String>, usize)> {
    let mut out = Vec::new();
    rows(&r.eng, &mut Vec::new(), &mut |r| {
        out.push((r.task.into_owned(), r.status, r.owner.map(Cow::into_owned), r.checks_passed));
        Ok(())
    })
    .unwrap();
    out
}

#[test]
fn follows_every_change() {
    let (_d, ws) = root();
    for t in ["A-1", "A-2", "A-3"] {
        open(&ws, t);
    }
    assert_eq!(board(&ws), truth(&ws));
    ws.claim("engineer", "A-2");
    ws.start("engineer", "A-2");
    ws.check("engineer", "A-2", "tests_passed");
    ws.release("engineer", "A-2");
    ws.claim("engineer", "A-3");
    let b = board(&ws);
    assert_eq!(b, truth(&ws));
    assert_eq!(b[1], ("A-2".into(), Status::New, None, 1));
    assert_eq!(b[2].1, Status::Claimed);
}

/// A writer that died between its record write and its C line leaves a P line; the
/// reader must believe the records, not the older C line.
#[test]
fn a_crash_between_record_and_board_is_read_from_the_records() {
    let (_d, ws) = root();
    open(&ws, "B-1");
    assert_eq!(board(&ws)[0].1, Status::New);
    // What a claim that crashed after its record write leaves behind.
    let mut rec = StatusRecord::parse(
        "B-1",
        &ws.eng.store.read_record(&id("B-1"), "status").unwrap().unwrap(),
    )
    .unwrap();
    rec.status = Status::Claimed;
    rec.owner = Some(crate::names::AgentName::new("engineer").unwrap());
    ws.eng.store.queue_append(FILE, "P B-1\n").unwrap();
    ws.eng.store.write_records(&id("B-1"), &[("status", Some(&rec.render()))]).unwrap();
    assert_eq!(board(&ws), truth(&ws));
    assert_eq!(board(&ws)[0].1, Status::Claimed);
    // Without the P line the stale C line would be believed: the check can fail.
    let text = ws.eng.store.queue_value(FILE).unwrap().replace("P B-1\n", "");
    ws.eng.store.set_queue_value(FILE, &text).unwrap();
    assert_ne!(board(&ws), truth(&ws));
}

/// After compaction the base is read in order and later lines override it: a task
/// changed, one deleted and one added after compaction all show correctly.
#[test]
fn base_and_tail() {
    let (_d, ws) = root();
    for t in ["E-1", "E-2", "E-3"] {
        open(&ws, t);
    }
    // Compact now (as a reboot would): the log becomes a sorted base.
    let text =
        ws.eng.store.queue_value(FILE).unwrap().replace(&super::super::boot_id(), "old-boot");
    ws.eng.store.set_queue_value(FILE, &text).unwrap();
    assert_eq!(board(&ws), truth(&ws));
    assert!(ws.eng.store.queue_value(FILE).unwrap().contains(&format!("# base {:020} ", 3)));
    ws.claim("engineer", "E-2");
    open(&ws, "E-0");
    write(&ws.eng, &id("E-3"), &[("status", None), ("checks", None)], None).unwrap();
    let b = board(&ws);
    assert_eq!(b, truth(&ws));
    let ids: Vec<&str> = b.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(ids, ["E-0", "E-1", "E-2"]);
    assert_eq!(b[2].1, Status::Claimed);
}

#[test]
fn another_boot_or_no_log_rebuilds() {
    let (_d, ws) = root();
    open(&ws, "C-1");
    let mut rec = StatusRecord::parse(
        "C-1",
        &ws.eng.store.read_record(&id("C-1"), "status").unwrap().unwrap(),
    )
    .unwrap();
    rec.status = Status::Failed;
    ws.eng.store.write_records(&id("C-1"), &[("status", Some(&rec.render()))]).unwrap();
    let text = ws
        .eng
        .store
        .queue_value(FILE)
        .unwrap()
        .replace(&super::super::boot_id(), "an-earlier-boot");
    ws.eng.store.set_queue_value(FILE, &text).unwrap();
    assert_eq!(board(&ws)[0].1, Status::Failed, "a log from another boot is not trusted");
    ws.eng.store.clear_queue().unwrap();
    assert_eq!(board(&ws), truth(&ws));
}

#[test]
fn compaction_keeps_the_board() {
    let (_d, ws) = root();
    open(&ws, "D-1");
    for _ in 0..80 {
        ws.claim("engineer", "D-1");
        ws.check("engineer", "D-1", "tests_passed");
        ws.release("engineer", "D-1");
    }
    let before = ws.eng.store.queue_value(FILE).unwrap().lines().count();
    assert_eq!(board(&ws), truth(&ws));
    let after = ws.eng.store.queue_value(FILE).unwrap().lines().count();
    assert!(
        after < before && after == 3,
        "compacted to header, base count and one row: {before} -> {after}"
    );
    assert_eq!(board(&ws), truth(&ws));
}
