//! The server stopped at once (like a crash) and started again while claimers run: no
//! grant a client was told about is lost, no task gets two owners, a client that cannot
//! know the outcome exits 1 (never 0), and its retry with the request id returns the task
//! it got.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{Grant, Out, Root, check_grants, nap};
use crate::pg_cluster;

/// The server's own log writer flushes only every 10 s in these tests: a commit answered
/// before it is on disk is then lost to the stop, not saved by a timer.
const SLOW_LOG_WRITER: &str = "wal_writer_delay=10s";

/// A cluster of the test's own with `SLOW_LOG_WRITER`, or `None` (said why) without
/// PostgreSQL here.
fn slow_cluster() -> Option<pg_cluster::Cluster> {
    pg_cluster::start_with(&[SLOW_LOG_WRITER]).map_err(|why| eprintln!("skipped: {why}")).ok()
}

/// A root of one engineer and one task on a `slow_cluster`, and a claim by e1 (`args`)
/// committed but not flushed: it runs as the `pg-no-flush` variant.
fn unflushed_claim(schema: &str, args: &[&str]) -> Option<(pg_cluster::Cluster, Root, Out)> {
    let cluster = slow_cluster()?;
    let mut root = Root::new(&format!("{}&schema={schema}", cluster.base_url()), "server", 1);
    root.open_tasks(1);
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-no-flush".into()));
    let o = root.run(Some("e1"), args);
    o.ok();
    root.env.clear();
    Some((cluster, root, o))
}

fn run(restarts: usize, claimers: usize) {
    let Some(mut cluster) = slow_cluster() else { return };
    let root = Root::new(&format!("{}&schema=restart", cluster.base_url()), "server", claimers);
    root.open_tasks(40);
    let stop = AtomicBool::new(false);
    let acked = Mutex::new(Vec::<Grant>::new());
    let (unknown, resolved, met) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| {
        for i in 1..=claimers {
            let (root, stop, acked, unknown, resolved, met) =
                (&root, &stop, &acked, &unknown, &resolved, &met);
            s.spawn(move || {
                let agent = format!("e{i}");
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let id = format!("{agent}-{round}");
                    let mut tries = 0;
                    loop {
                        let o = root
                            .run(Some(&agent), &["claim", "--next", "--request-id", &id, "--json"]);
                        match o.code {
                            0 => {
                                let g = Grant::from_json(&agent, &o.json()).unwrap();
                                if tries > 0 {
                                    resolved.fetch_add(1, Ordering::Relaxed);
                                }
                                acked.lock().unwrap().push(g.clone());
                                // Release until it is known to be done (the server may be down).
                                let e = g.epoch.to_string();
                                while root
                                    .run(Some(&agent), &["release", &g.task, "--epoch", &e])
                                    .code
                                    == 1
                                {
                                    // The server is away: a release met it too.
                                    met.fetch_add(1, Ordering::Relaxed);
                                    nap(200);
                                }
                                break;
                            }
                            1 => {
                                // Unknown (or no server): retry with the same request id.
                                if tries == 0 {
                                    unknown.fetch_add(1, Ordering::Relaxed);
                                    met.fetch_add(1, Ordering::Relaxed);
                                }
                                tries += 1;
                                nap(200);
                            }
                            _ => {
                                nap(20);
                                break;
                            }
                        }
                    }
                }
            });
        }
        for _ in 0..restarts {
            std::thread::sleep(Duration::from_millis(1500));
            let seen = met.load(Ordering::Relaxed);
            cluster.stop_immediate();
            // Down until a client has met the stopped server (at most 20 s: a loaded machine
            // starts the next claim late).
            let until = std::time::Instant::now() + Duration::from_secs(20);
            while met.load(Ordering::Relaxed) == seen && std::time::Instant::now() < until {
                nap(50);
            }
            cluster.restart();
        }
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
    });
    let acked = acked.into_inner().unwrap();
    let v = check_grants(&root.events(), &acked);
    eprintln!(
        "{} restarts: {} grants acknowledged, {} claims logged, {} runs exited 1, {} resolved by a retry",
        restarts,
        acked.len(),
        v.claims_logged,
        unknown.load(Ordering::Relaxed),
        resolved.load(Ordering::Relaxed)
    );
    assert!(v.double_owners.is_empty(), "double owners: {:?}", v.double_owners);
    assert!(v.missing_grants.is_empty(), "acknowledged grants lost: {:?}", v.missing_grants);
    assert!(v.epoch_regressions.is_empty(), "{:?}", v.epoch_regressions);
    assert_eq!(
        v.unacknowledged, 0,
        "every grant made was acknowledged (retries with the request id)"
    );
    // The restart happened under load: some claim or release met the stopped server.
    assert!(met.load(Ordering::Relaxed) > 0, "no client saw the server go away");
    root.run(None, &["doctor"]).ok();
}

#[test]
fn a_server_restart_under_load_loses_no_grant() {
    run(1, 4);
}

/// The broken variant: a task's commit answered before its flush (`pg-no-flush`) loses
/// an acknowledged grant to the stop, and the checker says so. One claim, then the stop
/// at once: under load, the commits of others flush a broken claim's too as often as not.
#[test]
fn a_claim_answered_before_its_flush_is_lost_to_a_restart() {
    let args = ["claim", "--next", "--json"];
    let Some((mut cluster, root, o)) = unflushed_claim("unflushed", &args) else { return };
    let acked = vec![Grant::from_json("e1", &o.json()).unwrap()];
    cluster.stop_immediate();
    cluster.restart();
    let v = check_grants(&root.events(), &acked);
    assert!(!v.missing_grants.is_empty(), "the broken variant lost no acknowledged grant");
}

/// `cargo test --test pg -- --ignored restart_full`
#[test]
#[ignore = "five restarts; run by hand"]
fn restart_full_five_times() {
    run(5, 4);
}

/// A reader never sees an event a crash takes back. A claim committed but not yet on disk
/// (its writer's flush cut off: the writer runs as the `pg-no-flush` variant, and the
/// server's log writer waits 10 s) is read by `log`, then the server stops at once: the
/// event `log` printed is in the log after the restart, because the read flushed the log
/// before answering. With the reader broken too (`brk`), `log` prints an event the stop
/// takes back. Returns whether the event printed was still there.
fn printed_event_survives(brk: Option<&str>) -> Option<bool> {
    let (mut cluster, mut root, _) = unflushed_claim("seen", &["claim", "T-000"])?;
    if let Some(b) = brk {
        root.env.push(("CIRCE_TEST_BREAK".into(), b.into()));
    }
    let o = root.run(None, &["log", "--json", "--kind", "claim"]);
    o.ok();
    let printed: Vec<(u64, String)> = o
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_default())
        .map(|e| (e["id"].as_u64().unwrap_or(0), e["task_id"].as_str().unwrap_or("").to_string()))
        .collect();
    assert!(
        printed.len() == 1 && printed.iter().all(|(id, task)| *id > 0 && task == "T-000"),
        "log printed: {}",
        o.stdout
    );
    cluster.stop_immediate();
    cluster.restart();
    root.env.clear();
    let after = root.events();
    Some(printed.iter().all(|(id, task)| {
        after.iter().any(|e| {
            e.id == *id
                && e.event == circe::event::EventKind::Claim
                && e.task.as_ref().is_some_and(|t| t.as_str() == task)
        })
    }))
}

#[test]
fn an_event_a_reader_saw_survives_a_crash() {
    if let Some(kept) = printed_event_survives(None) {
        assert!(kept, "the claim event `log` printed was gone after the restart");
    }
}

/// The broken variant: a read that does not flush first (`pg-read-unflushed`) prints an
/// event the stop takes back.
#[test]
fn an_unflushed_read_shows_an_event_a_crash_takes_back() {
    if let Some(kept) = printed_event_survives(Some("pg-read-unflushed")) {
        assert!(!kept, "the broken variant's printed event survived the restart");
    }
}

/// The followers outlive a server restart: `watch` connects again and hands on what comes
/// after, from its cursor; `log --follow` prints it; `wait` answers with it; `mirror
/// --watch` goes on mirroring; `chat watch` prints the line said after.
#[test]
fn followers_connect_again_after_a_server_restart() {
    let mut cluster = match pg_cluster::start(&[]) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let root = Root::new(&format!("{}&schema=follow", cluster.base_url()), "server", 1);
    let dir = tempfile::tempdir().unwrap();
    let mirror = dir.path().join("m");
    let mut watch = root
        .command(None, &["watch", "--all", "--cursor", "w", "--json", "--kind", "open"])
        .spawn()
        .unwrap();
    let mut mirroring = root
        .command(None, &["mirror", mirror.to_str().unwrap(), "--watch", "--interval", "1s"])
        .spawn()
        .unwrap();
    let mut log =
        root.command(None, &["log", "--follow", "--limit", "0", "--json"]).spawn().unwrap();
    let mut chatting = root.command(Some("e1"), &["chat", "watch"]).spawn().unwrap();
    let rx = lines(watch.stdout.take().unwrap());
    let logged = lines(log.stdout.take().unwrap());
    let heard = lines(chatting.stdout.take().unwrap());
    nap(500);
    root.open_tasks(1);
    root.run(Some("e1"), &["chat", "say", "--to", "all", "before"]).ok();
    let first = heard.recv_timeout(Duration::from_secs(20)).expect("the first line");
    assert!(first.contains("before"), "{first}");
    let first = rx.recv_timeout(Duration::from_secs(20)).expect("the first open");
    assert!(first.contains("T-000"), "{first}");
    let first = logged.recv_timeout(Duration::from_secs(20)).expect("the first open, logged");
    assert!(first.contains("T-000"), "{first}");
    let waiting = root
        .command(Some("e1"), &["wait", "--for", "claimable", "--new", "--timeout", "60s", "--json"])
        .spawn()
        .unwrap();
    nap(500);
    cluster.stop_immediate();
    nap(1500);
    cluster.restart();
    root.open_task("T-001", "y");
    root.run(Some("e1"), &["chat", "say", "--to", "all", "after"]).ok();
    let next = rx.recv_timeout(Duration::from_secs(30));
    let heard_next = heard.recv_timeout(Duration::from_secs(30));
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let count = || std::fs::read_dir(mirror.join("NEW_MESSAGES")).map_or(0, Iterator::count);
    while count() < 2 && std::time::Instant::now() < until {
        nap(100);
    }
    let mirrored = count();
    let logged_next = logged.recv_timeout(Duration::from_secs(30));
    let waited = crate::common::Out::from(&waiting.wait_with_output().unwrap());
    let (w, m, l) =
        (watch.try_wait().unwrap(), mirroring.try_wait().unwrap(), log.try_wait().unwrap());
    let c = chatting.try_wait().unwrap();
    let _ = (watch.kill(), mirroring.kill(), log.kill(), chatting.kill());
    let _ = (watch.wait(), mirroring.wait(), log.wait(), chatting.wait());
    assert!(
        (w, m, l, c) == (None, None, None, None),
        "a follower ended: watch {w:?}, mirror {m:?}, log {l:?}, chat watch {c:?}"
    );
    let heard_next = heard_next.expect("chat watch printed nothing after the restart");
    assert!(heard_next.contains("after"), "{heard_next}");
    let next = next.expect("the watcher handed on nothing after the restart");
    assert!(next.contains("T-001"), "{next}");
    let logged_next = logged_next.expect("log --follow printed nothing after the restart");
    assert!(logged_next.contains("T-001"), "{logged_next}");
    assert_eq!(waited.code, 0, "wait: {}", waited.stderr);
    assert!(waited.stdout.contains("T-001"), "wait: {}", waited.stdout);
    assert_eq!(mirrored, 2, "the mirror did not follow after the restart");
}

/// A follower started while the server is down waits for it, as after a restart: `log
/// --follow` and `watch` print what comes once it is up; a `wait` whose time runs out
/// first is exit 7 (not 1), naming the root it could not reach.
#[test]
fn followers_started_while_the_server_is_down_wait_for_it() {
    let mut cluster = match pg_cluster::start(&[]) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let root = Root::new(&format!("{}&schema=early", cluster.base_url()), "server", 1);
    cluster.stop_immediate();
    let short = root
        .command(Some("e1"), &["wait", "--for", "claimable", "--timeout", "2s", "--json"])
        .output()
        .unwrap();
    let short = crate::common::Out::from(&short);
    // A command line that needs no root to be refused is refused at once, not waited on.
    for args in [
        &["log", "--follow", "--kind", "no-such-kind"][..],
        &["watch", "--poll", "soon"],
        &["wait", "--for", "inbox", "--claim"],
    ] {
        let o = crate::common::Out::from(&root.command(Some("e1"), args).output().unwrap());
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
    }
    let mut log =
        root.command(None, &["log", "--follow", "--limit", "0", "--json"]).spawn().unwrap();
    let mut watch = root
        .command(None, &["watch", "--all", "--cursor", "early", "--json", "--kind", "open"])
        .spawn()
        .unwrap();
    let logged = lines(log.stdout.take().unwrap());
    let watched = lines(watch.stdout.take().unwrap());
    nap(1500);
    let (l, w) = (log.try_wait().unwrap(), watch.try_wait().unwrap());
    cluster.restart();
    // Once the followers are in (a new `watch` starts at the newest event).
    nap(6000);
    root.open_task("T-001", "y");
    let logged_next = logged.recv_timeout(Duration::from_secs(30));
    let watched_next = watched.recv_timeout(Duration::from_secs(30));
    let _ = (log.kill(), watch.kill());
    let _ = (log.wait(), watch.wait());
    assert_eq!(short.code, 7, "wait: {}", short.stderr);
    assert!(short.stderr.contains("could not be reached"), "wait: {}", short.stderr);
    assert_eq!((l, w), (None, None), "a follower ended while the server was down");
    let logged_next = logged_next.expect("log --follow printed nothing once the server was up");
    assert!(logged_next.contains("T-001"), "{logged_next}");
    let watched_next = watched_next.expect("watch printed nothing once the server was up");
    assert!(watched_next.contains("T-001"), "{watched_next}");
}

/// The lines a child prints, as they come.
fn lines(out: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}
