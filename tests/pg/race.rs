//! Claimers racing over one queue from several clients, with clients killed (-9) at random
//! moments: no task ever has two owners, epochs only grow, every grant a client was told
//! about is in the log, and the grants nobody heard of (a client killed after COMMIT) are
//! no more than the kills and all go back to the queue at `reap`.

use std::collections::HashSet;
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::caught::until_caught;
use crate::common::{Grant, Root, Verdict, check_grants, nap, rng};

/// How a run is set up.
pub struct Plan {
    pub tasks: usize,
    pub claimers: usize,
    pub seconds: u64,
    /// Kill a random running client about this often (`None`: no kills).
    pub kill_every_ms: Option<u64>,
    /// The lease claimers take (expired leases are reaped at the end).
    pub ttl_s: u64,
}

/// What happened.
pub struct Run {
    pub verdict: Verdict,
    pub kills: usize,
    pub claims: usize,
    pub not_new_after_reap: Vec<String>,
    pub doctor: String,
}

struct Shared {
    pids: Mutex<HashSet<u32>>,
    acked: Mutex<Vec<Grant>>,
    kills: AtomicUsize,
    stop: AtomicBool,
}

/// Run a command as a client: registered for the killer while it runs. Returns its
/// output, or `None` when it was killed.
fn client(sh: &Shared, mut cmd: std::process::Command) -> Option<crate::common::Out> {
    let child = cmd.spawn().expect("spawn circe");
    let pid = child.id();
    sh.pids.lock().unwrap().insert(pid);
    let out = child.wait_with_output().expect("wait");
    sh.pids.lock().unwrap().remove(&pid);
    if out.status.signal() == Some(9) {
        sh.kills.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    Some(crate::common::Out::from(&out))
}

fn claimer(root: &Root, agent: &str, sh: &Shared, until: Instant, ttl: &str) {
    while Instant::now() < until && !sh.stop.load(Ordering::Relaxed) {
        let cmd = root.command(Some(agent), &["claim", "--next", "--ttl", ttl, "--json"]);
        let Some(out) = client(sh, cmd) else { continue };
        match out.code {
            0 => {
                let g = Grant::from_json(agent, &out.json()).expect("a claim's JSON");
                sh.acked.lock().unwrap().push(g.clone());
                let epoch = g.epoch.to_string();
                let cmd = root.command(Some(agent), &["release", &g.task, "--epoch", &epoch]);
                let _ = client(sh, cmd);
            }
            6 => nap(20),
            _ => {}
        }
    }
}

fn killer(sh: &Shared, every_ms: u64, until: Instant) {
    let mut r = rng(u64::from(std::process::id()) ^ 0x9e37_79b9_7f4a_7c15);
    while Instant::now() < until && !sh.stop.load(Ordering::Relaxed) {
        nap(every_ms / 2 + r() % every_ms);
        let pids: Vec<u32> = sh.pids.lock().unwrap().iter().copied().collect();
        if pids.is_empty() {
            continue;
        }
        #[expect(clippy::cast_possible_truncation, reason = "an index into a short list")]
        let pid = pids[(r() % pids.len() as u64) as usize];
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Race `plan.claimers` clients per root in `roots` (one per host: the same database seen
/// from each) over `plan.tasks` tasks, then reap and check through `first` (this host's
/// view of the root).
pub fn race(first: &Root, roots: &[Root], plan: &Plan) -> Run {
    first.open_tasks(plan.tasks);
    let sh = Arc::new(Shared {
        pids: Mutex::new(HashSet::new()),
        acked: Mutex::new(Vec::new()),
        kills: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    });
    let until = Instant::now() + Duration::from_secs(plan.seconds);
    let ttl = format!("{}s", plan.ttl_s);
    std::thread::scope(|s| {
        for (h, root) in roots.iter().enumerate() {
            for i in 1..=plan.claimers {
                let agent = format!("e{}", h * plan.claimers + i);
                let (sh, ttl) = (&sh, &ttl);
                s.spawn(move || claimer(root, &agent, sh, until, ttl));
            }
        }
        if let Some(every) = plan.kill_every_ms {
            let sh = &sh;
            s.spawn(move || killer(sh, every, until));
        }
    });
    // Every lease taken has run out by now plus the ttl: reap returns them all.
    std::thread::sleep(Duration::from_secs(plan.ttl_s + 1));
    first.run(Some("coordinator"), &["reap"]).ok();
    let eng = first.engine();
    let mut not_new = Vec::new();
    eng.board(&mut |r| {
        if r.status.as_str() != "new" {
            not_new.push(format!("{} is {}", r.task, r.status.as_str()));
        }
        Ok(())
    })
    .expect("board");
    let doctor = first.run(None, &["doctor"]);
    let acked = sh.acked.lock().unwrap().clone();
    let events = first.events();
    Run {
        verdict: check_grants(&events, &acked),
        kills: sh.kills.load(Ordering::Relaxed),
        claims: acked.len(),
        not_new_after_reap: not_new,
        doctor: format!("exit {}: {}{}", doctor.code, doctor.stdout, doctor.stderr),
    }
}

/// Every pass criterion of the kill -9 scenario.
#[track_caller]
pub fn assert_clean(r: &Run) {
    let v = &r.verdict;
    eprintln!(
        "{} grants acknowledged, {} claims logged, {} unacknowledged, {} kills",
        v.acknowledged, v.claims_logged, v.unacknowledged, r.kills
    );
    assert!(v.double_owners.is_empty(), "double owners: {:?}", v.double_owners);
    assert!(v.epoch_regressions.is_empty(), "epochs went back: {:?}", v.epoch_regressions);
    assert!(
        v.missing_grants.is_empty(),
        "acknowledged grants missing from the log: {:?}",
        v.missing_grants
    );
    assert!(
        v.unacknowledged <= r.kills,
        "{} unacknowledged grants but {} kills",
        v.unacknowledged,
        r.kills
    );
    assert!(r.not_new_after_reap.is_empty(), "not returned by reap: {:?}", r.not_new_after_reap);
    assert!(r.doctor.starts_with("exit 0"), "doctor: {}", r.doctor);
    assert!(r.claims > 0, "no claim succeeded");
}

#[test]
fn claimers_with_kill_9_never_share_a_task() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 4);
    let r = race(
        &root,
        std::slice::from_ref(&root),
        &Plan { tasks: 30, claimers: 4, seconds: 6, kill_every_ms: Some(150), ttl_s: 2 },
    );
    assert_clean(&r);
}

/// The checker fails on a variant without the row lock and version check.
#[test]
fn the_race_checker_sees_double_owners_without_the_lock() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 8);
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-unlocked".into()));
    let doubles = until_caught("pg race checker", 3, Duration::from_secs(60), |_| {
        let plan = Plan { tasks: 3, claimers: 8, seconds: 4, kill_every_ms: None, ttl_s: 1 };
        race(&root, std::slice::from_ref(&root), &plan).verdict.double_owners
    });
    assert!(!doubles.is_empty(), "no double owner seen without the lock");
}

/// The full run (RELIABILITY.md): `cargo test --test pg -- --ignored race_full`.
#[test]
#[ignore = "60 s; run by hand"]
fn race_full_two_hosts_60s() {
    let c = need_pg!();
    let plan = Plan { tasks: 200, claimers: 4, seconds: 60, kill_every_ms: Some(200), ttl_s: 3 };
    let r = match crate::netns::network(2) {
        Ok((net, nc)) => {
            let admin = Root::new(&format!("{}&schema=race_full", nc.base_url()), "server", 8);
            let roots = [net.root(&nc, 1, "race_full"), net.root(&nc, 2, "race_full")];
            race(&admin, &roots, &plan)
        }
        Err(why) => {
            eprintln!("no network namespaces ({why}): the two hosts share this one");
            let url = c.fresh_url();
            let admin = Root::new(&url, "server", 8);
            race(&admin, &[Root::at(&url), Root::at(&url)], &plan)
        }
    };
    assert_clean(&r);
}
