//! Clients killed through PgBouncer (transaction pooling, one server connection) while a
//! round trip of several requests is in flight. The pooler gives a server connection back
//! to its pool as soon as it answers "idle"; were a request sent after a transaction's end
//! in the same round trip (a commit's flush, a read's flush check), a client killed before
//! its answer would leave that answer on the connection, and the next client to get it
//! would read it as its own (a panic, an unexpected message, or worse, a wrong count). The
//! checker: every client not killed succeeds (or finds nothing to claim), every reader's
//! JSON parses. With requests sent on after an "idle" answer in the same round trip, as
//! circe once did (`CIRCE_TEST_BREAK=pg-pipeline-past-idle`: the flush after the commit,
//! a read's flush check after the read), it sees clients read others' answers.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::caught::until_caught;
use crate::common::{Out, Root, rng};

/// `claimers` claimers and one reader for `secs` seconds; each claim is killed one time in
/// two, at a random moment of its run (as long as the last claim not killed took, so the
/// kills spread over a claim's whole run however loaded the machine is). Leases of 1 s:
/// a task a killed claim took is taken over soon after. What went wrong, as lines.
fn killed_mid_round_trip(root: &Root, claimers: usize, secs: u64) -> (Vec<String>, usize) {
    let problems = Mutex::new(Vec::new());
    let kills = Mutex::new(0usize);
    let run_us = std::sync::atomic::AtomicU64::new(15_000);
    let until = Instant::now() + Duration::from_secs(secs);
    std::thread::scope(|s| {
        for n in 1..=claimers {
            let (problems, kills, run_us) = (&problems, &kills, &run_us);
            s.spawn(move || {
                let me = format!("e{n}");
                let mut next = rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
                while Instant::now() < until {
                    let start = Instant::now();
                    let mut child = root
                        .command(Some(&me), &["claim", "--next", "--ttl", "1s", "--json"])
                        .spawn()
                        .expect("spawn circe");
                    let r = next();
                    let killed = r.is_multiple_of(2);
                    if killed {
                        let spread = run_us.load(std::sync::atomic::Ordering::Relaxed).max(1);
                        std::thread::sleep(Duration::from_micros(r % spread));
                        if child.kill().is_ok() {
                            *kills.lock().unwrap() += 1;
                        }
                    }
                    let out = Out::from(&child.wait_with_output().expect("wait"));
                    if !killed && out.code == 0 {
                        let took = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
                        run_us.store(took, std::sync::atomic::Ordering::Relaxed);
                    }
                    match out.code {
                        -1 | 6 => continue,
                        0 => {}
                        _ => {
                            problems.lock().unwrap().push(format!("{me}: claim: {out:?}"));
                            continue;
                        }
                    }
                    let Some(task) = out.json()["task_id"].as_str().map(String::from) else {
                        problems.lock().unwrap().push(format!("{me}: claim's JSON: {out:?}"));
                        continue;
                    };
                    // Exit 4: the lease ran out and another claimer took the task over.
                    let back = root.run(Some(&me), &["release", &task]);
                    if back.code != 0 && back.code != 4 {
                        problems.lock().unwrap().push(format!("{me}: release: {back:?}"));
                    }
                }
            });
        }
        let problems = &problems;
        s.spawn(move || {
            let mut i = 0;
            while Instant::now() < until {
                i += 1;
                let args: &[&str] = if i % 2 == 0 {
                    &["log", "--json", "--limit", "1"]
                } else {
                    &["tasks", "--json"]
                };
                let out = root.run(None, args);
                if out.code != 0 || out.json().is_null() {
                    problems.lock().unwrap().push(format!("reader: {args:?}: {out:?}"));
                }
            }
        });
    });
    (problems.into_inner().unwrap(), kills.into_inner().unwrap())
}

#[test]
fn clients_killed_mid_round_trip_leave_the_pooled_connection_clean() {
    let c = need_pg!();
    let Some((_bouncer, root)) = crate::seq::pooled_root(c, 1, 3) else { return };
    root.open_tasks(30);
    let (problems, kills) = killed_mid_round_trip(&root, 3, 8);
    eprintln!("pg pooler: {kills} clients killed mid-command, {} problems", problems.len());
    assert!(kills > 20, "too few kills: {kills}");
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_checker_catches_requests_sent_on_past_an_idle_answer() {
    let c = need_pg!();
    let Some((_bouncer, mut root)) = crate::seq::pooled_root(c, 1, 3) else { return };
    root.open_tasks(30);
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-pipeline-past-idle".into()));
    let p = until_caught("pooled round trip checker", 3, Duration::from_secs(90), |_| {
        killed_mid_round_trip(&root, 3, 8).0
    });
    assert!(!p.is_empty(), "no client read another's answer");
}

/// A pooler the URL does not name, which refuses the `options` circe gives its session's
/// settings in when it connects: circe connects again without them (the settings go as
/// statements) and works as through any pooler.
#[test]
fn a_pooler_that_takes_no_options_still_serves() {
    let c = need_pg!();
    let bouncer = match crate::pg_cluster::Bouncer::start_ignoring(c, 2, "extra_float_digits") {
        Ok(b) => b,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let fresh = c.fresh_url();
    let schema = fresh.rsplit("schema=").next().expect("a schema");
    // The task is opened directly: a send holds its sender's sequence counter, which needs
    // the server named apart behind a pooler. A claim holds nothing from one statement to
    // the next.
    Root::new(&fresh, "server", 1).open_tasks(1);
    let root = Root::at(&bouncer.url(schema));
    let got = root.run(Some("e1"), &["claim", "--next", "--json"]);
    assert_eq!(got.ok().json()["task_id"], "T-000");
    let log = std::fs::read_to_string(bouncer.dir.join("pgbouncer.log")).unwrap_or_default();
    assert!(log.contains("unsupported startup parameter"), "the pooler took the options: {log}");
}

/// A follower through PgBouncer whose URL does not name the server apart: the pooler runs
/// its LISTEN on a server connection it then gives to others, so no notification reaches
/// it. It says so once, with what to write in the URL, and still answers (reading every
/// second). Named apart, or direct, it says nothing.
#[test]
fn a_follower_through_a_pooler_without_the_server_named_says_it_is_not_woken() {
    let c = need_pg!();
    let Some((bouncer, named)) = crate::seq::pooled_root(c, 2, 1) else { return };
    named.open_tasks(1);
    let schema = named.url.rsplit("schema=").next().expect("a schema");
    let schema = schema.split('&').next().expect("a schema");
    let pooled = Root::at(&bouncer.url(schema));
    let direct = Root::at(&format!("{}&schema={schema}", c.base_url()));
    for (root, warned) in [(&pooled, true), (&named, false), (&direct, false)] {
        let args = ["wait", "--for", "status:T-000=claimed", "--timeout", "20s"];
        let mut cmd = root.command(Some("e1"), &args);
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let child = cmd.spawn().unwrap();
        crate::common::nap(1500);
        named.run(Some("e1"), &["claim", "T-000"]).ok();
        let out = Out::from(&child.wait_with_output().unwrap());
        assert_eq!(out.code, 0, "{}: {out:?}", root.url);
        let said = out.stderr.contains("notifications do not come back")
            && out.stderr.contains("listen_port=");
        assert_eq!(said, warned, "{}: {out:?}", root.url);
        named.run(Some("e1"), &["release", "T-000"]).ok();
    }
}

/// A sender whose URL reaches the server through PgBouncer without naming the server apart:
/// its sequence counter's session lock would stay on a pooled server session, held by
/// nobody, and every later send of that agent would wait it out and fail. The lock is not
/// taken: the send is refused (exit 2, naming `listen_port=`), nothing is delivered and no
/// advisory lock is left. Named apart, the same send goes through.
#[test]
fn a_session_lock_through_a_pooler_without_the_server_named_is_refused() {
    let c = need_pg!();
    let Some((bouncer, named)) = crate::seq::pooled_root(c, 2, 1) else { return };
    let schema = named.url.rsplit("schema=").next().expect("a schema");
    let schema = schema.split('&').next().expect("a schema");
    let pooled = Root::at(&bouncer.url(schema));
    // This root's advisory locks (their first key is the schema's, hashed): other tests
    // share the server.
    let locks = || {
        c.psql(&format!(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
              AND classid = (hashtext('\"{schema}\"')::int8 & 4294967295)::oid"
        ))
        .trim()
        .to_string()
    };
    let before = locks();
    let send = ["send", "--to", "agent:e1", "--intent", "inform", "--summary", "hi"];
    let out = pooled.run(Some("coordinator"), &send);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("listen_port="), "{out:?}");
    assert!(out.stderr.contains("not the server's own"), "{out:?}");
    assert_eq!(locks(), before, "an advisory lock was left on a pooled session");
    let inbox = named.run(Some("e1"), &["inbox", "--json"]);
    assert_eq!(inbox.ok().json()["messages"].as_array().map(Vec::len), Some(0), "{inbox:?}");
    // The same agent's next send, named apart, is not kept waiting by a lock left behind.
    named.run(Some("coordinator"), &send).ok();
    let inbox = named.run(Some("e1"), &["inbox", "--json"]);
    assert_eq!(inbox.ok().json()["messages"].as_array().map(Vec::len), Some(1), "{inbox:?}");
}
