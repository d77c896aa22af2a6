//! Sequence numbers in a database root: senders racing from separate clients (two per
//! agent, so one agent's sends race each other), some killed with -9. Every sender's
//! delivered numbers are exactly 1..max (no repeat, no gap); with the advisory lock off
//! (`CIRCE_TEST_BREAK=seq-race`) the checker sees numbers given twice. The same through
//! PgBouncer in transaction mode, where the sender's session lock is taken on the server
//! named apart; taken through the pooler instead (`pg-locks-pooled`), numbers repeat.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::caught::until_caught;
use crate::common::{Root, nap};

/// Per sender: number -> the message ids that carry it.
type Numbers = BTreeMap<String, BTreeMap<u64, HashSet<String>>>;

fn numbers(root: &Root) -> Numbers {
    let eng = root.engine();
    let snap = circe::engine::Snapshot::read(&*eng).expect("read the root");
    let mut out: Numbers = BTreeMap::new();
    for (_, files) in &snap.boxes {
        for (_, bytes) in files {
            let m = circe::message::parse_bytes(bytes, circe::message::Mode::Draft).expect("parse");
            if let (Some(from), Some(n), Some(id)) = (m.from_agent(), m.seq, m.msg_id.clone()) {
                out.entry(from.to_string()).or_default().entry(n).or_default().insert(id);
            }
        }
    }
    out
}

fn problems(n: &Numbers) -> Vec<String> {
    let mut p = Vec::new();
    for (s, nums) in n {
        for (k, ids) in nums {
            if ids.len() > 1 {
                p.push(format!("{s}: #{k} given to {} messages", ids.len()));
            }
        }
        let max = nums.keys().next_back().copied().unwrap_or(0);
        let missing: Vec<u64> = (1..=max).filter(|k| !nums.contains_key(k)).collect();
        if !missing.is_empty() {
            p.push(format!("{s}: gaps {missing:?} of 1..={max}"));
        }
    }
    p
}

/// `agents` senders, two clients each, `secs` seconds, a client killed every `kill_ms`.
/// Returns the numbers given, the kills, and the problems (a send that failed among them).
fn run(root: &Root, agents: usize, secs: u64, kill_ms: Option<u64>) -> (usize, usize, Vec<String>) {
    let pids = Mutex::new(HashSet::new());
    let kills = Mutex::new(0usize);
    let failed = Mutex::new(Vec::new());
    let until = Instant::now() + Duration::from_secs(secs);
    std::thread::scope(|s| {
        for slot in 0..agents * 2 {
            let (pids, failed, me) = (&pids, &failed, format!("e{}", slot % agents + 1));
            s.spawn(move || {
                let mut i = 0;
                while Instant::now() < until {
                    i += 1;
                    let task = format!("T-{slot}-{i}");
                    let args: Vec<&str> = if i % 5 == 0 {
                        vec![
                            "send",
                            "--to",
                            "all",
                            "--intent",
                            "task",
                            "--task",
                            &task,
                            "--summary",
                            "t",
                        ]
                    } else {
                        vec!["send", "--to", "all", "--intent", "inform", "--summary", "x"]
                    };
                    let child = root.command(Some(&me), &args).spawn().expect("spawn");
                    let pid = child.id();
                    pids.lock().unwrap().insert(pid);
                    let out = child.wait_with_output().expect("wait");
                    pids.lock().unwrap().remove(&pid);
                    if !(out.status.success() || out.status.signal() == Some(9)) {
                        let why = String::from_utf8_lossy(&out.stderr).into_owned();
                        failed.lock().unwrap().push(format!("{me}: a send failed: {why}"));
                    }
                }
            });
        }
        if let Some(every) = kill_ms {
            let (pids, kills) = (&pids, &kills);
            s.spawn(move || {
                while Instant::now() < until {
                    nap(every);
                    let Some(pid) = pids.lock().unwrap().iter().next().copied() else { continue };
                    let _ =
                        std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
                    *kills.lock().unwrap() += 1;
                }
            });
        }
    });
    let n = numbers(root);
    let total = n.values().map(BTreeMap::len).sum();
    let k = *kills.lock().unwrap();
    let mut p = failed.into_inner().unwrap();
    p.extend(problems(&n));
    (total, k, p)
}

#[test]
fn racing_senders_with_kill_9_number_without_gaps_or_repeats() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 4);
    let (total, kills, p) = run(&root, 4, 6, Some(40));
    eprintln!("pg seq: {total} numbers, {kills} kills");
    assert!(total > 20, "too few sends: {total}");
    assert!(p.is_empty(), "{p:#?}");
    let doctor = root.run(None, &["doctor"]);
    doctor.ok();
}

#[test]
fn the_checker_catches_senders_without_the_lock() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 2);
    root.env.push(("CIRCE_TEST_BREAK".into(), "seq-race".into()));
    let p = until_caught("pg numbering checker", 3, Duration::from_secs(60), |_| {
        let (_, _, p) = run(&root, 2, 4, None);
        p.into_iter().filter(|x| x.contains("given to")).collect()
    });
    assert!(!p.is_empty(), "no repeat with the lock off");
}

/// A PgBouncer (transaction pooling, `pool` server connections) in front of the test
/// cluster, and a new root reached through it, the server named apart as README says.
fn pooled_root(
    c: &crate::pg_cluster::Cluster,
    pool: usize,
    engineers: usize,
) -> Option<(crate::pg_cluster::Bouncer, Root)> {
    let bouncer = match crate::pg_cluster::Bouncer::start(c, pool) {
        Ok(b) => b,
        Err(why) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let fresh = c.fresh_url();
    let schema = fresh.rsplit("schema=").next().expect("a schema");
    let url = format!(
        "{}&listen_host={}&listen_port={}",
        bouncer.url(schema),
        c.socket.display(),
        c.port
    );
    let root = Root::new(&url, "server", engineers);
    Some((bouncer, root))
}

#[test]
fn through_pgbouncer_racing_senders_number_without_gaps_or_repeats() {
    let c = need_pg!();
    let Some((_bouncer, root)) = pooled_root(c, 3, 4) else { return };
    // No kills here: a sender killed while its delivery is in flight through the pooler
    // lets go of its lock (on its own connection) before the delivery commits, and the next
    // sender can take the same number (PROTOCOLS section 18, "sequence numbers").
    let (total, _, p) = run(&root, 4, 5, None);
    eprintln!("pg seq through PgBouncer: {total} numbers");
    assert!(p.is_empty(), "{p:#?}");
    assert!(total > 20, "too few sends: {total}");
    root.run(None, &["doctor"]).ok();
}

#[test]
fn the_checker_catches_session_locks_taken_through_pgbouncer() {
    let c = need_pg!();
    let Some((_bouncer, mut root)) = pooled_root(c, 3, 2) else { return };
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-locks-pooled".into()));
    let p = until_caught("pg numbering through a pooler", 3, Duration::from_secs(60), |_| {
        let (_, _, p) = run(&root, 2, 4, None);
        p.into_iter().filter(|x| x.contains("given to")).collect()
    });
    assert!(!p.is_empty(), "no repeat with the locks taken through the pooler");
}
