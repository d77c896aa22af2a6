//! The log file itself: torn lines, lines from before ids, rotation, and finding an id in a
//! large file.

use super::*;
use crate::event::EventKind;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::init(dir.path(), crate::config::DEFAULT_CONFIG).unwrap();
    (dir, store.with_durability(crate::config::Durability::Relaxed))
}

fn ev() -> Event {
    Event::new(EventKind::Notify, "circe", "2025-11-21T17:00:00.000Z".into())
}

fn ids(store: &Store, after: u64) -> Vec<u64> {
    read(store, Cursor::after(after), usize::MAX).unwrap().iter().map(|e| e.id).collect()
}

fn raw_append(store: &Store, text: &str) {
    let mut f = atomic::append_open(&current(store)).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// A reader stops before a line still being written; the next appender ends the torn line
/// and goes on with the next id.
#[test]
fn torn_tail() {
    let (_d, s) = store();
    append(&s, &mut [ev(), ev()]).unwrap();
    raw_append(&s, "{\"id\":3,\"v\":2,\"ts\":\"x");
    assert_eq!(ids(&s, 0), [1, 2], "the torn line is not read");
    assert_eq!(last_id(&s).unwrap(), 2);
    let mut more = [ev()];
    append(&s, &mut more).unwrap();
    assert_eq!(more[0].id, 3, "the torn line's id was never given out");
    assert_eq!(ids(&s, 0), [1, 2, 3]);
    assert_eq!(ids(&s, 2), [3]);
}

/// Lines written before events had ids are kept and skipped by readers.
#[test]
fn legacy_lines() {
    let (_d, s) = store();
    raw_append(&s, "{\"ts\":\"2025-11-21T17:00:00.000Z\",\"event\":\"claim\",\"agent\":\"qa\"}\n");
    let mut e = [ev()];
    append(&s, &mut e).unwrap();
    assert_eq!(e[0].id, 1, "ids start at 1 after a format-1 log");
    assert_eq!(ids(&s, 0), [1]);
}

/// Rotation renames the current file to its segment; cursors read on across it.
#[test]
fn rotation_keeps_every_cursor() {
    let (_d, s) = store();
    append(&s, &mut [ev(), ev(), ev()]).unwrap();
    let name = rotate(&s).unwrap().unwrap();
    assert_eq!(name, segment_name(1, 3));
    assert!(rotate(&s).unwrap().is_none(), "nothing to rotate twice");
    assert_eq!(last_id(&s).unwrap(), 3, "the last id comes from the newest segment");
    append(&s, &mut [ev(), ev()]).unwrap();
    rotate(&s).unwrap();
    append(&s, &mut [ev()]).unwrap();
    for after in 0..6 {
        assert_eq!(ids(&s, after), ((after + 1)..=6).collect::<Vec<_>>(), "after {after}");
    }
    let two = read(&s, Cursor::after(2), 2).unwrap();
    assert_eq!(two.iter().map(|e| e.id).collect::<Vec<_>>(), [3, 4], "max across a segment end");
}

/// In a log far larger than one read, a cursor near the end finds its place by binary
/// search and reads exactly what follows.
#[test]
fn large_log() {
    let (_d, s) = store();
    let mut batch: Vec<Event> = (0..20_000).map(|_| ev()).collect();
    append(&s, &mut batch).unwrap();
    assert_eq!(ids(&s, 19_990), (19_991..=20_000).collect::<Vec<_>>());
    assert_eq!(read(&s, Cursor::after(12_345), 1).unwrap()[0].id, 12_346);
    assert!(offset_of(&current(&s), 19_991).unwrap() > 0, "not a scan from the start");
}

/// Reading backwards: the newest first, across segments, below a given id, and a line
/// still being written is not read.
#[test]
fn reading_back() {
    let (_d, s) = store();
    append(&s, &mut [ev(), ev(), ev()]).unwrap();
    rotate(&s).unwrap();
    let mut batch: Vec<Event> = (0..9_000).map(|_| ev()).collect();
    append(&s, &mut batch).unwrap();
    raw_append(&s, "{\"id\":9004,\"v\":2,");
    let back = |before, max| -> Vec<u64> {
        read_back(&s, before, max).unwrap().iter().map(|e| e.id).collect()
    };
    assert_eq!(back(None, 3), [9003, 9002, 9001]);
    assert_eq!(back(Some(6), 10), [5, 4, 3, 2, 1], "on into the older segment");
    assert_eq!(back(None, usize::MAX).len(), 9003, "every event once");
    assert_eq!(back(Some(1), 5), Vec::<u64>::new());
}

/// Reading back below an id starts near it, not at the end of the file (a filtered `log`
/// reads back many times: from the end each time it was quadratic), and lines longer than
/// the search's reads are looked past, not lost.
#[test]
fn reading_back_below_an_id_starts_near_it() {
    let (_d, s) = store();
    let mut batch: Vec<Event> = (0..5_000)
        .map(|i| {
            let mut e = ev();
            if i % 97 == 0 {
                e.note = Some("x".repeat(9_000)); // longer than a search read
            }
            e
        })
        .collect();
    append(&s, &mut batch).unwrap();
    let back = |before, max| -> Vec<u64> {
        read_back(&s, before, max).unwrap().iter().map(|e| e.id).collect()
    };
    for before in [2, 98, 99, 100, 1_000, 2_911, 2_912, 4_999, 5_000, 5_001, 9_000] {
        let want: Vec<u64> = (1..before.min(5_001)).rev().take(7).collect();
        assert_eq!(back(Some(before), 7), want, "before {before}");
    }
    let (f, len) = atomic::open_regular(&current(&s)).unwrap();
    let end = end_before(&f, len, &current(&s), 1_000).unwrap();
    assert!(end < len / 2, "starts near id 1000: {end} of {len}");
    assert_eq!(end_before(&f, len, &current(&s), 9_999).unwrap(), len);
}
