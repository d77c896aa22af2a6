//! The ordered change feed: a follower reading `id > cursor` while claimers commit never
//! skips an event, because ids come from a one-row counter updated in the committing
//! transaction (they become visible in id order). Shown failing on a variant that takes
//! ids from a sequence (handed out before commit).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use circe::event::Cursor;

use crate::common::{Root, nap};

/// Claimers churn for `secs` while a follower reads; returns (ids the follower got in
/// order, every id in the log at the end, gaps the follower saw while reading).
fn follow(root: &Root, secs: u64) -> (Vec<u64>, Vec<u64>, usize) {
    root.open_tasks(20);
    let stop = AtomicBool::new(false);
    let mut got = Vec::new();
    let mut gaps = 0;
    std::thread::scope(|s| {
        for i in 1..=4 {
            let (root, stop) = (&root, &stop);
            s.spawn(move || {
                let agent = format!("e{i}");
                while !stop.load(Ordering::Relaxed) {
                    let o = root.run(Some(&agent), &["claim", "--next", "--json"]);
                    if o.code == 0 {
                        let t = o.json()["task_id"].as_str().unwrap_or_default().to_string();
                        root.run(Some(&agent), &["release", &t]);
                    } else {
                        nap(10);
                    }
                }
            });
        }
        let eng = root.engine();
        let until = Instant::now() + Duration::from_secs(secs);
        let mut cursor = Cursor::START;
        while Instant::now() < until {
            for e in eng.read_events(cursor, 50).unwrap() {
                if e.id != cursor.after + 1 {
                    gaps += 1;
                }
                got.push(e.id);
                cursor = Cursor::after(e.id);
            }
            nap(2);
        }
        stop.store(true, Ordering::Relaxed);
    });
    nap(300);
    let all: Vec<u64> = root.events().iter().map(|e| e.id).collect();
    (got, all, gaps)
}

#[test]
fn a_follower_never_skips_an_event() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 4);
    let (got, all, gaps) = follow(&root, 4);
    assert!(got.len() > 20, "too few events to tell ({})", got.len());
    assert_eq!(gaps, 0, "the follower saw ids out of order");
    let missed = all.iter().filter(|id| **id <= *got.last().unwrap() && !got.contains(id)).count();
    assert_eq!(missed, 0, "the follower skipped {missed} events");
}

/// The checker fails when ids come from a sequence (taken before commit).
#[test]
fn the_feed_checker_sees_skips_with_sequence_ids() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 4);
    let schema = url.rsplit("schema=").next().unwrap();
    c.psql(&format!(
        "CREATE SEQUENCE \"{schema}\".bad_ids START 1000;
         CREATE OR REPLACE FUNCTION \"{schema}\".append_events(p_task text, p_lines text[], p_ticket text)
         RETURNS bigint LANGUAGE plpgsql AS $$
         DECLARE v_first bigint; v_k int := coalesce(array_length(p_lines, 1), 0);
         BEGIN
           IF v_k = 0 THEN RETURN 0; END IF;
           WITH ins AS (
             INSERT INTO \"{schema}\".events (id, task, line)
               SELECT nextval('\"{schema}\".bad_ids'), p_task,
                      replace(x.l, '\"@circe:ticket@\"', to_json(p_ticket)::text)
               FROM unnest(p_lines) WITH ORDINALITY AS x(l, o) RETURNING id)
           SELECT min(id) INTO v_first FROM ins;
           PERFORM pg_sleep(random() * 0.03);
           RETURN v_first;
         END $$;"
    ));
    let (got, all, _) = follow(&root, 4);
    let missed =
        all.iter().filter(|id| **id <= *got.last().unwrap_or(&0) && !got.contains(id)).count();
    assert!(missed > 0, "the broken feed showed no skip ({} events)", got.len());
}
