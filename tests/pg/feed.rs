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

/// CPU seconds (user + system) process `pid` has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which ends with the last ')'): utime is the 12th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// A waiter whose LISTEN connection is cut keeps waiting without spinning, listens again,
/// and still sees what comes.
#[test]
fn a_waiter_whose_listen_connection_breaks_waits_on_and_is_woken() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = Root::new(&url, "server", 1);
    let waiter = root
        .command(Some("e1"), &["wait", "--for", "claimable", "--timeout", "30s", "--json"])
        .spawn()
        .expect("spawn circe wait");
    let pid = waiter.id();
    let listening = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %{schema}%' AND state = 'idle'"
    );
    let started = Instant::now();
    while c.psql(&listening).trim() != "1" {
        assert!(started.elapsed() < Duration::from_secs(10), "the waiter never listened");
        nap(50);
    }
    let cut = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %{schema}%'"
    );
    c.psql(&cut);
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(2));
    let spent = cpu_seconds(pid) - before;
    // Spinning on the closed connection burns a core; waiting costs next to nothing.
    assert!(spent < 0.5, "the waiter used {spent:.2} s of CPU in 2 s after its LISTEN broke");
    let relistened = Instant::now();
    while c.psql(&listening).trim() != "1" {
        assert!(relistened.elapsed() < Duration::from_secs(10), "the waiter never listened again");
        nap(50);
    }
    root.open_tasks(1);
    let out = waiter.wait_with_output().expect("wait for circe wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("T-000"), "{out:?}");
}

/// A follower (a live board, a watch) knows an agent another client added once it reads
/// that `agent_add` from the feed: the engine's list is read again then.
#[test]
fn a_follower_knows_an_agent_added_once_it_reads_its_event() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 1);
    let eng = root.engine();
    let knows = |eng: &dyn circe::engine::Engine| {
        eng.agents().unwrap().iter().any(|(a, r)| a.as_str() == "dev2" && r == "engineer")
    };
    let last = eng.last_event_id().unwrap();
    root.run(None, &["agent", "add", "dev2", "--role", "engineer"]).ok();
    assert!(!knows(eng.as_ref()), "the list is read at the opening, not at every call");
    let read = eng.read_events(Cursor::after(last), 16).unwrap();
    assert!(read.iter().any(|e| e.event.as_str() == "agent_add"), "{read:?}");
    assert!(knows(eng.as_ref()), "the follower still does not know dev2");
}

/// A line of a format newer than this circe reads, put in the events table by SQL (as a
/// newer circe writes it, and with its id in the line): `log` and `watch` refuse it (exit 3)
/// naming the event's id and the table, as on a folder root they name the file; `doctor`
/// reports it as a violation instead of failing (also with a cursor that has to read past it).
#[test]
fn a_row_of_a_newer_format_is_named_where_it_lies() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = Root::new(&url, "server", 1);
    root.open_task("T-1", "x");
    root.run(None, &["watch", "--all", "--from-start", "--cursor", "c1", "--once"]).ok();
    let last: u64 = c.psql(&format!("SELECT last FROM \"{schema}\".feed")).trim().parse().unwrap();
    let (a, b) = (last + 1, last + 2);
    c.psql(&format!(
        "UPDATE \"{schema}\".feed SET last = last + 2;
         INSERT INTO \"{schema}\".events (id, task, line) VALUES
           ({a}, NULL, '{{\"id\":0,\"v\":99,\"ts\":\"2026-11-29T16:18:27Z\",\"event\":\"x\",\"agent\":\"x\"}}'),
           ({b}, NULL, '{{\"id\":{b},\"v\":98,\"ts\":\"2026-11-29T16:18:28Z\",\"event\":\"x\",\"agent\":\"x\"}}')"
    ));
    let table = format!("table \"{schema}\".events");
    // `log` may meet either row first; the watcher reads on from its cursor, to the first
    // (its line says id 0: the row's id is the event's).
    let said =
        |v: u32, id: u64| format!("format {v} (event {id}); this circe reads up to 3, in {table}");
    let log = root.run(None, &["log", "--all"]);
    assert_eq!(log.code, 3, "{log:?}");
    assert!(log.stderr.contains(&said(99, a)) || log.stderr.contains(&said(98, b)), "{log:?}");
    let watch = root.run(None, &["watch", "--all", "--cursor", "c1", "--once"]);
    assert_eq!(watch.code, 3, "{watch:?}");
    assert!(watch.stderr.contains(&said(99, a)), "{watch:?}");
    let d = root.run(None, &["doctor", "--json"]);
    assert_eq!(d.code, 1, "{d:?}");
    let said = d.json()["violations"].to_string();
    for (id, v) in [(a, 99), (b, 98)] {
        let line = format!("event {id} in {table} is of format {v}").replace('"', "\\\"");
        assert!(said.contains(&line), "{said}");
    }
    assert!(said.contains("cursor c1 cannot go on"), "{said}");
    assert!(!said.contains("no whole line"), "{said}");
}
