//! Sequence numbers in a database root: senders racing from separate clients (two per
//! agent, so one agent's sends race each other), some killed with -9. Every sender's
//! delivered numbers are exactly 1..max (no repeat, no gap); with the advisory lock and the
//! counter's compare-and-set off (`CIRCE_TEST_BREAK=seq-race`) the checker sees numbers
//! given twice. With the lock alone off (`pg-seq-nolock`) the compare-and-set finds the
//! tries that lost a race (they number again, or exit 4 on the third) and no number
//! repeats. Messages, task messages and numbered chat lines all race. The same through PgBouncer in
//! transaction mode, with kills, where the sender's session lock is taken on the server
//! named apart; taken through the pooler instead (`pg-locks-pooled`, no kills), the lock
//! holds nothing, and numbers still do not repeat: the compare-and-set finds the counter moved instead.

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
    // Numbered chat lines: `[e1-to-all]: (E1 #N): text`.
    let log = eng.chat_log().expect("a database root keeps its chat channel");
    for e in log.chat_read(0, usize::MAX).expect("read the chat channel") {
        let first = e.text.lines().next().unwrap_or_default();
        let Some((_, said)) = first.split_once("]: ") else { continue };
        if let Some(l) = circe::seq::parse_line(said)
            && let Some(n) = l.seq
        {
            let id = format!("chat line {}", e.id);
            out.entry(l.role.to_lowercase()).or_default().entry(n).or_default().insert(id);
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

/// What a run of racing senders gave.
struct Run {
    /// Numbers given, over all senders.
    total: usize,
    kills: usize,
    /// Tries that found the counter moved while they held it: numbered again (a warning)
    /// or, the last try, refused (exit 4).
    moved: usize,
    /// Numbers given twice, gaps, and sends that failed otherwise.
    problems: Vec<String>,
}

/// `agents` senders, two clients each, `secs` seconds, a client killed every `kill_ms`.
fn run(root: &Root, agents: usize, secs: u64, kill_ms: Option<u64>) -> Run {
    // Task ids of this run: a root can see several runs.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let nth = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pids = Mutex::new(HashSet::new());
    let kills = Mutex::new(0usize);
    let moved = Mutex::new(0usize);
    let failed = Mutex::new(Vec::new());
    let until = Instant::now() + Duration::from_secs(secs);
    std::thread::scope(|s| {
        for slot in 0..agents * 2 {
            let (pids, failed, moved) = (&pids, &failed, &moved);
            let me = format!("e{}", slot % agents + 1);
            s.spawn(move || {
                let mut i = 0;
                while Instant::now() < until {
                    i += 1;
                    let task = format!("T-{nth}-{slot}-{i}");
                    let args: Vec<&str> = if i % 7 == 3 {
                        vec!["chat", "say", "--seq", "--to", "all", "x"]
                    } else if i % 5 == 0 {
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
                    let why = String::from_utf8_lossy(&out.stderr).into_owned();
                    *moved.lock().unwrap() += why.matches("moved while this send held it").count();
                    let refused = out.status.code() == Some(4) && why.contains("held it");
                    if !(refused || out.status.success() || out.status.signal() == Some(9)) {
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
    let mut p = failed.into_inner().unwrap();
    p.extend(problems(&n));
    Run {
        total: n.values().map(BTreeMap::len).sum(),
        kills: *kills.lock().unwrap(),
        moved: *moved.lock().unwrap(),
        problems: p,
    }
}

/// The numbers given twice in `r`.
fn repeats(r: Run) -> Vec<String> {
    r.problems.into_iter().filter(|x| x.contains("given to")).collect()
}

#[test]
fn racing_senders_with_kill_9_number_without_gaps_or_repeats() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 4);
    let r = run(&root, 4, 6, Some(40));
    eprintln!("pg seq: {} numbers, {} kills, {} moved", r.total, r.kills, r.moved);
    assert!(r.total > 20, "too few sends: {}", r.total);
    assert!(r.problems.is_empty(), "{:#?}", r.problems);
    // On the engine's own connection the lock and the delivery share one session: no send
    // ever finds its counter moved.
    assert_eq!(r.moved, 0, "tries found the counter moved though the lock held");
    // Senders killed between a delivery and its events left journals: repair logs them.
    root.run(None, &["doctor", "--repair"]).ok();
    let doctor = root.run(None, &["doctor"]);
    doctor.ok();
}

#[test]
fn without_the_lock_the_compare_and_set_refuses_a_send_rather_than_repeat_a_number() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 2);
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-seq-nolock".into()));
    let mut moved = 0;
    for _ in 0..3 {
        let r = run(&root, 2, 3, None);
        assert!(r.problems.is_empty(), "{:#?}", r.problems);
        moved += r.moved;
        if moved > 0 {
            break;
        }
    }
    eprintln!("pg seq without the lock: {moved} tries found the counter moved");
    assert!(moved > 0, "no send lost a race: the compare-and-set was not exercised");
    // A try the comparison refused delivered nothing, so it kept no journal of its events:
    // none is left once every sender is done, and doctor is clean without a repair.
    let schema = root.url.rsplit("schema=").next().unwrap();
    let left = c.psql(&format!("SELECT count(*) FROM \"{schema}\".event_journals"));
    assert_eq!(left.trim(), "0", "journals left by refused tries");
    root.env.clear();
    root.run(None, &["doctor"]).ok();
}

#[test]
fn the_checker_catches_senders_without_the_lock() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 2);
    root.env.push(("CIRCE_TEST_BREAK".into(), "seq-race".into()));
    let p = until_caught("pg numbering checker", 3, Duration::from_secs(60), |_| {
        repeats(run(&root, 2, 4, None))
    });
    assert!(!p.is_empty(), "no repeat with the lock off");
}

/// A PgBouncer (transaction pooling, `pool` server connections) in front of the test
/// cluster, and a new root reached through it, the server named apart as README says.
pub(crate) fn pooled_root(
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
    // Without kills the lock on the server named apart keeps each sender's turns apart: no
    // send finds its counter moved.
    let r = run(&root, 4, 4, None);
    eprintln!("pg seq through PgBouncer: {} numbers, {} moved", r.total, r.moved);
    assert!(r.problems.is_empty(), "{:#?}", r.problems);
    assert_eq!(r.moved, 0, "tries found the counter moved though the lock held");
    assert!(r.total > 20, "too few sends: {}", r.total);
    // A sender killed while its delivery is in flight through the pooler lets go of its
    // lock (on its own connection) before the delivery commits; the next sender's
    // compare-and-set then finds the counter moved and it numbers again (exit 4 on a third
    // refusal), never giving a number twice (PROTOCOLS section 18, "sequence numbers").
    let r = run(&root, 4, 4, Some(60));
    eprintln!(
        "pg seq through PgBouncer, with kills: {} numbers, {} kills, {} moved",
        r.total, r.kills, r.moved
    );
    assert!(r.problems.is_empty(), "{:#?}", r.problems);
    root.run(None, &["doctor", "--repair"]).ok();
    root.run(None, &["doctor"]).ok();
}

#[test]
fn the_checker_catches_session_locks_taken_through_pgbouncer() {
    let c = need_pg!();
    let Some((_bouncer, mut root)) = pooled_root(c, 3, 2) else { return };
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-locks-pooled".into()));
    // Taken through the pooler, the lock keeps no sender waiting for another: sends race,
    // and the compare-and-set refuses the losers (or a lock left on a pooled session makes
    // them wait it out).
    let p = until_caught("pg numbering through a pooler", 3, Duration::from_secs(60), |_| {
        let r = run(&root, 2, 4, None);
        let mut p = r.problems;
        if r.moved > 0 {
            p.push(format!("{} tries found their counter moved", r.moved));
        }
        p
    });
    assert!(!p.is_empty(), "every send kept its turn with the locks taken through the pooler");
}

/// A sender's counter held by a server session past its client (here a psql session; in
/// life a commit that waits on the server after its circe gave up, or a lock left through a
/// pooler): after 10 s the send is exit 4 naming that session, and the hint says how to end
/// it; ended, the next send goes through.
#[test]
fn a_counter_held_too_long_names_the_server_session_that_holds_it() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = Root::new(&url, "server", 1);
    let app = format!("holder_seq_{}", std::process::id());
    let lock_sql = format!(
        "SELECT pg_advisory_lock(hashtext('\"{schema}\"'), hashtext('seq/coordinator')); SELECT pg_sleep(60);"
    );
    let (mut holder, held) = c.psql_holding(&lock_sql, &app);
    let send = ["send", "--to", "agent:e1", "--intent", "inform", "--summary", "hi", "--json"];
    let out = root.run(Some("coordinator"), &send);
    assert_eq!(out.code, 4, "{out:?}");
    let err = &out.json()["error"];
    assert_eq!(err["details"]["holder_pid"].to_string(), held, "{}", out.stdout);
    let hint = err["hint"].as_str().unwrap_or_default();
    assert!(hint.contains(&format!("pg_terminate_backend({held})")), "{hint}");
    assert!(hint.contains(&format!("application `{app}`")), "{hint}");
    c.psql(&format!("SELECT pg_terminate_backend({held})"));
    let _ = holder.kill();
    let _ = holder.wait();
    root.run(Some("coordinator"), &send).ok();
}
