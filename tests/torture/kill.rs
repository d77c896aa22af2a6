//! kill -9 storm: agent processes loop claim / status / check / heartbeat / release; one is
//! SIGKILLed at random every few ms and restarted under the same name. After each batch:
//! `doctor --repair`, then doctor clean, records agree with boxes, every task's moves in the
//! log follow on and end at its record, no message lost or duplicated, no (task, epoch)
//! claimed twice.

use std::collections::HashMap;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::caught::until_caught;
use crate::common::{Rng, Root, lost_or_duplicated, scaled, spawn_worker};

pub struct Storm {
    pub kills: usize,
    pub claims: usize,
    pub problems: Vec<String>,
}

pub fn storm(
    agents: usize,
    ntasks: usize,
    kills: usize,
    batch: usize,
    every_ms: (u64, u64),
    env: &[(&str, &str)],
    limit: Duration,
) -> Storm {
    let r = Root::new(agents);
    for t in 0..ntasks {
        r.open(&format!("T{t}"));
    }
    let before = r.messages();
    let logs = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = Instant::now();
    let spawn = |a: usize, generation: usize| -> Child {
        let args = vec![
            format!("e{a}"),
            ntasks.to_string(),
            (a * 1000 + generation + 1).to_string(),
            logs.path().join(format!("e{a}.log")).display().to_string(),
        ];
        spawn_worker("storm", &args, &r.dir, env)
    };
    let mut problems = Vec::new();
    let mut done = 0;
    let mut generation = 0;
    while done < kills && start.elapsed() < limit {
        let mut kids: Vec<Child> = (1..=agents).map(|a| spawn(a, generation)).collect();
        std::thread::sleep(Duration::from_millis(30));
        for _ in 0..batch.min(kills - done) {
            std::thread::sleep(Duration::from_millis(every_ms.0 + rng.next() % every_ms.1));
            let i = rng.below(agents);
            let _ = kids[i].kill();
            let _ = kids[i].wait();
            done += 1;
            generation += 1;
            kids[i] = spawn(i + 1, generation);
        }
        for k in &mut kids {
            let _ = k.kill();
            let _ = k.wait();
        }
        r.doctor(true);
        let (code, v) = r.doctor(false);
        if code != 0 {
            problems.push(format!("after {done} kills and doctor --repair: {v:?}"));
        }
        problems.extend(r.task_problems().into_iter().map(|p| format!("after {done} kills: {p}")));
        // Every change that stands has its event: each task's moves follow on in the log.
        problems.extend(
            crate::crash::task_moves(&r).into_iter().map(|p| format!("after {done} kills: {p}")),
        );
        let after = r.messages();
        problems.extend(lost_or_duplicated(&before, &after));
        if after.len() != before.len() {
            problems.push(format!(
                "after {done} kills: {} messages, want {}",
                after.len(),
                before.len()
            ));
        }
        if !problems.is_empty() {
            break;
        }
    }
    let mut seen: HashMap<(String, String), String> = HashMap::new();
    let mut claims = 0;
    for a in 1..=agents {
        let t = std::fs::read_to_string(logs.path().join(format!("e{a}.log"))).unwrap_or_default();
        for line in t.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if f[0] == "CLAIM" {
                claims += 1;
                if let Some(prev) = seen.insert((f[1].into(), f[2].into()), f[3].into()) {
                    problems.push(format!(
                        "double owner of {} at epoch {}: {prev} and {}",
                        f[1], f[2], f[3]
                    ));
                }
            } else {
                problems.push(format!("e{a}: {line}"));
            }
        }
    }
    Storm { kills: done, claims, problems }
}

#[test]
fn kill_storm_fast() {
    let t = Instant::now();
    let s = storm(4, 6, 50, 25, (10, 30), &[], Duration::from_secs(40));
    eprintln!(
        "kill storm fast: {} kills, {} claims, {} problems, {:?}",
        s.kills,
        s.claims,
        s.problems.len(),
        t.elapsed()
    );
    assert!(s.problems.is_empty(), "{:#?}", &s.problems[..s.problems.len().min(30)]);
    assert!(
        s.kills >= 50 && s.claims > 10,
        "storm too small: {} kills {} claims",
        s.kills,
        s.claims
    );
}

#[test]
fn kill_storm_checker_catches_clobber() {
    // Each try gives the agents longer between kills, so that on a loaded machine they
    // still get to race each other before they are killed.
    let problems = until_caught("kill storm checker", 4, Duration::from_secs(120), |i| {
        let gap = 40 + 120 * i as u64;
        storm(4, 1, 40, 20, (gap, 60), &[("CIRCE_TEST_BREAK", "clobber")], Duration::from_secs(30))
            .problems
    });
    assert!(!problems.is_empty(), "storm checker saw nothing with locks broken");
    eprintln!(
        "clobber caught by storm checker: {} problems, first: {}",
        problems.len(),
        problems[0]
    );
}

#[test]
fn kill_storm_checker_catches_no_task_journal() {
    // A kill between a change's records and its events, with no journal of the events: the
    // task's moves in the log skip one.
    let problems = until_caught("kill storm checker", 4, Duration::from_secs(120), |_| {
        let broken = [("CIRCE_TEST_BREAK", "no-task-journal")];
        storm(4, 6, 50, 25, (10, 30), &broken, Duration::from_secs(30)).problems
    });
    assert!(problems.iter().any(|p| p.contains("task T")), "{problems:#?}");
    eprintln!("no-task-journal caught by storm checker: first: {}", problems[0]);
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn kill_storm_long() {
    let t = Instant::now();
    let s = storm(6, 40, scaled(1_000), 100, (5, 40), &[], Duration::from_secs(300));
    eprintln!(
        "kill storm long: {} kills, {} claims, {} problems, {:?}",
        s.kills,
        s.claims,
        s.problems.len(),
        t.elapsed()
    );
    assert!(s.problems.is_empty(), "{:#?}", &s.problems[..s.problems.len().min(30)]);
    assert!(s.kills >= scaled(1_000), "only {} kills in the time limit", s.kills);
}
