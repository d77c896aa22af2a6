//! Worker loops run in child processes (`worker_entry`): many attempts per process, each
//! opening the workspace afresh like a CLI run, calling the same library functions the
//! CLI calls. Every claim success is logged as one whole line: `CLAIM task epoch agent`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use circe::engine::RootSpec;
use circe::error::Kind;
use circe::names::{AgentName, CheckName, TaskId};
use circe::ops as task;
use circe::task::Status;
use circe::workspace::Workspace;

use crate::common::{Rng, log_line};

fn root() -> PathBuf {
    PathBuf::from(std::env::var("CIRCE_ROOT").unwrap())
}

fn ws() -> Workspace {
    Workspace::open(&RootSpec::Path(root())).unwrap()
}

pub fn run(kind: &str, a: &[String]) {
    match kind {
        "race" => race(
            &a[0],
            a[1].parse().unwrap(),
            a[2].parse().unwrap(),
            &a[3],
            a[4].parse().unwrap(),
            Path::new(&a[5]),
        ),
        "storm" => storm(&a[0], a[1].parse().unwrap(), a[2].parse().unwrap(), Path::new(&a[3])),
        "writers" => writers(&a[0], &a[1], &a[2], a[3].parse().unwrap(), Path::new(&a[4])),
        "events" => events(a[0].parse().unwrap()),
        "seq" => crate::seq::worker(a),
        "sendlog" => crate::sendlog::worker(a),
        other => panic!("unknown worker kind {other}"),
    }
}

/// Claim (by id or `--next`), log the success, release at that epoch (must succeed).
/// Mode `lapse`: `--next` with a clock two seconds further each time and a lease of one,
/// never released, so that nearly every claim takes over a lease another worker let run out.
fn race(me: &str, ntasks: usize, attempts: usize, mode: &str, seed: u64, log: &Path) {
    let me = &AgentName::new(me).unwrap();
    let mut rng = Rng(seed | 1);
    let base = circe::clock::parse("2030-01-01T00:00:00Z").unwrap();
    for i in 0..attempts {
        let ws = ws();
        let next = match mode {
            "next" | "lapse" => true,
            "id" => false,
            _ => i % 2 == 0,
        };
        if mode == "lapse" {
            let at = base + chrono::TimeDelta::seconds(2 * i64::try_from(i).unwrap());
            ws.pin_clock(at);
            match task::claim_next(&ws, me, "engineer", Some(Duration::from_secs(1))) {
                Ok(o) => log_line(log, &format!("CLAIM {} {} {me}", o.task, o.epoch)),
                Err(e) if matches!(e.kind, Kind::Conflict | Kind::NothingToClaim) => {}
                Err(e) => log_line(log, &format!("ERR claim {me} {:?} {}", e.kind, e.message)),
            }
            continue;
        }
        let r = if next {
            task::claim_next(&ws, me, "engineer", None)
        } else {
            let t = TaskId::new(format!("T{}", rng.below(ntasks))).unwrap();
            task::claim(&ws, me, "engineer", &t, None)
        };
        match r {
            Ok(o) if o.already_held => log_line(log, &format!("HELD {} {} {me}", o.task, o.epoch)),
            Ok(o) => {
                log_line(log, &format!("CLAIM {} {} {me}", o.task, o.epoch));
                if let Err(e) = task::release(&ws, me, &o.task, None, false, Some(o.epoch)) {
                    log_line(
                        log,
                        &format!("RELEASEFAIL {} {} {me} {}", o.task, o.epoch, e.message),
                    );
                }
            }
            Err(e) if matches!(e.kind, Kind::Conflict | Kind::NothingToClaim) => {}
            Err(e) => log_line(log, &format!("ERR claim {me} {:?} {}", e.kind, e.message)),
        }
    }
}

/// Loop claim / work / release until killed (or 10 minutes).
fn storm(me: &str, ntasks: usize, seed: u64, log: &Path) {
    let me = &AgentName::new(me).unwrap();
    let tests_passed = CheckName::new("tests_passed").unwrap();
    let mut rng = Rng(seed | 1);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(600) {
        let ws = ws();
        let t = TaskId::new(format!("T{}", rng.below(ntasks))).unwrap();
        let o = match task::claim(&ws, me, "engineer", &t, None) {
            Ok(o) => o,
            Err(e) if matches!(e.kind, Kind::Conflict | Kind::NothingToClaim) => continue,
            Err(e) => {
                log_line(log, &format!("ERR claim {me} {t} {:?} {}", e.kind, e.message));
                continue;
            }
        };
        if !o.already_held {
            log_line(log, &format!("CLAIM {} {} {me}", o.task, o.epoch));
        }
        let ep = Some(o.epoch);
        let steps: [(&str, circe::error::Result<()>); 4] = [
            ("status", task::set_status(&ws, me, &t, Status::InProgress, None, ep).map(|_| ())),
            ("check", task::check_set(&ws, me, &t, &tests_passed, true, ep).map(|_| ())),
            ("heartbeat", task::heartbeat(&ws, me, &t, None, ep).map(|_| ())),
            ("release", task::release(&ws, me, &t, None, false, ep).map(|_| ())),
        ];
        for (what, r) in steps {
            match r {
                Ok(()) => {}
                // in_progress -> in_progress after a restart is refused by the table: fine.
                Err(e) if e.kind == Kind::Refused && what == "status" => {}
                Err(e) => log_line(log, &format!("ERR {what} {me} {t} {:?} {}", e.kind, e.message)),
            }
        }
    }
}

/// `n` events appended one at a time, each by a freshly opened root (like a CLI run).
fn events(n: usize) {
    for _ in 0..n {
        let ws = ws();
        let ev = circe::event::Event::now(circe::event::EventKind::Notify, "circe");
        ws.engine.append_events(vec![ev]).unwrap();
    }
}

/// `n` read-modify-write updates of one task's checks by its owner.
fn writers(me: &str, t: &str, id: &str, n: usize, log: &Path) {
    let me = &AgentName::new(me).unwrap();
    let t = &TaskId::new(t).unwrap();
    // What waiting for the task's lock cost this writer: reported, not judged (timings on a
    // shared machine are no test).
    let (mut refused, mut slowest) = (0, Duration::ZERO);
    for i in 0..n {
        let ws = ws();
        let began = Instant::now();
        let name = CheckName::new(format!("w{id}_{i}")).unwrap();
        // A lock waited for over its 10 s changed nothing, and says to retry: a writer does
        // (on a slow machine 8 writers on one task can starve one past the wait). An
        // update lost without an error is what the run looks for.
        let mut tries = 0;
        let r = loop {
            tries += 1;
            match task::check_set(&ws, me, t, &name, true, None) {
                Err(e)
                    if tries < 4
                        && e.kind == Kind::Conflict
                        && e.message.contains("is locked by another circe process") =>
                {
                    refused += 1;
                }
                r => break r,
            }
        };
        slowest = slowest.max(began.elapsed());
        if let Err(e) = r {
            log_line(log, &format!("ERR {id} {i} {:?} {}", e.kind, e.message));
        }
    }
    let stat = log.with_extension("stat");
    let _ = std::fs::write(stat, format!("{refused} {}", slowest.as_millis()));
}
