//! Contention: concurrent claimers (circe CLI, circe library workers, sqlite3, mv and the
//! /bin/true ceiling) interleaved in short slices, then every task checked.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::procs::{
    WORKER_ROLE, circe, circe_env, claimed_task, must, populate_circe, populate_mv,
    populate_sqlite, sqlite, task_id, timed,
};
use crate::stats::percentile;
use crate::{Opts, usage};
use circe::boxes::Mailbox;
use circe::config::Durability;
use circe::engine::RootSpec;
use circe::names::{AgentName, TaskId};
use circe::workspace::Workspace;

pub(crate) struct Contention {
    pub(crate) label: String,
    pub(crate) claims: usize,
    pub(crate) attempts: usize,
    pub(crate) secs: f64,
    pub(crate) lat: Vec<f64>,
    pub(crate) double: usize,
    pub(crate) lost: usize,
    pub(crate) drained: bool,
}

/// `workers` threads, each spawning claims back to back for `secs`. `claim(w)` runs one
/// claim and returns (ms, granted id, queue empty).
pub(crate) fn race(
    workers: usize,
    secs: f64,
    claim: &(dyn Fn(usize) -> (f64, Option<String>, bool) + Sync),
) -> RaceOut {
    let stop = AtomicBool::new(false);
    let attempts = AtomicUsize::new(0);
    let drained = AtomicBool::new(false);
    let grants = Mutex::new(Vec::new());
    let lat = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|sc| {
        for w in 0..workers {
            let (stop, attempts, drained, grants, lat) =
                (&stop, &attempts, &drained, &grants, &lat);
            sc.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let (ms, got, empty) = claim(w);
                    attempts.fetch_add(1, Ordering::Relaxed);
                    if let Some(id) = got {
                        grants.lock().unwrap().push((w, id));
                        lat.lock().unwrap().push(ms);
                    } else if empty {
                        drained.store(true, Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
        // Stop at the deadline, or as soon as a worker found the queue empty (the rate is
        // then over the time the queue lasted).
        let deadline = start + Duration::from_secs_f64(secs);
        while Instant::now() < deadline && !drained.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let took = start.elapsed().as_secs_f64();
    (
        grants.into_inner().unwrap(),
        lat.into_inner().unwrap(),
        attempts.into_inner(),
        drained.into_inner(),
        took,
    )
}

pub(crate) fn doubles(grants: &[(usize, String)]) -> usize {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (_, id) in grants {
        *seen.entry(id).or_default() += 1;
    }
    seen.values().map(|c| c - 1).sum()
}

/// What one claimer did over all its slices.
pub(crate) type RaceOut = (Vec<(usize, String)>, Vec<f64>, usize, bool, f64);
/// One claimer: runs for the given seconds.
pub(crate) type Claimer<'a> = Box<dyn Fn(f64) -> RaceOut + Sync + 'a>;

/// Contention: every claimer runs in slices of about one second, claimers interleaved
/// (A B C .. then .. C B A), so a shared machine's load drifts over all of them alike.
#[expect(clippy::too_many_lines)] // six claimers, each set up and checked
pub(crate) fn contention(opts: &Opts, base: &Path) -> Vec<Contention> {
    let (w, secs, n) = (opts.workers, opts.secs, opts.contention_tasks);
    eprintln!("contention: populating {n} tasks for {w} workers ...");
    let dir = base.join("contention");
    let root = populate_circe(&dir.join("circe"), n, w);
    let mvdir = dir.join("mv");
    let names = populate_mv(&mvdir, n, w);
    let db = dir.join("tasks.db");
    populate_sqlite(&db, n);

    let cli = |d: Durability| {
        let root = &root;
        move |wi: usize| {
            let (ms, ok, out) =
                timed(circe(root, &format!("w{wi}"), d).args(["--json", "claim", "--next"]), true);
            let got = if ok { claimed_task(&out) } else { None };
            let empty = !ok && out.contains("nothing");
            (ms, got, empty)
        }
    };
    let (cli_full, cli_relaxed) = (cli(Durability::Full), cli(Durability::Relaxed));
    let sqlite_claim = |wi: usize| {
        let (ms, ok, out) = timed(
            &mut sqlite(
                &db,
                &format!(
                    "UPDATE tasks SET owner='w{wi}', status='claimed' WHERE id=(SELECT id FROM tasks \
                     WHERE status='new' ORDER BY priority, created LIMIT 1) RETURNING id"
                ),
            ),
            true,
        );
        let id = out.trim().to_string();
        (ms, (ok && !id.is_empty()).then_some(id.clone()), ok && id.is_empty())
    };
    // The ceiling for any one-process-per-claim tool here: spawning a trivial binary.
    let spawn = |_wi: usize| {
        let (ms, ok, _) = timed(&mut Command::new("/bin/true"), false);
        (ms, ok.then(String::new), false)
    };
    let cursors: Vec<AtomicUsize> = (0..w).map(|_| AtomicUsize::new(0)).collect();
    let mv_claim = |wi: usize| {
        // Every worker walks the same list: racing for the same files, as naive scripts do.
        let i = cursors[wi].fetch_add(1, Ordering::Relaxed);
        let Some(name) = names.get(i) else { return (0.0, None, true) };
        let (ms, ok, _) = timed(
            Command::new("mv")
                .arg(mvdir.join("NEW_MESSAGES").join(name))
                .arg(mvdir.join(format!("AGENTS/w{wi}/INBOX")).join(name)),
            false,
        );
        (ms, ok.then(|| name.clone()), false)
    };

    let claimers: Vec<(&str, Claimer)> = vec![
        ("circe claim --next (full)", Box::new(|t| race(w, t, &cli_full))),
        ("circe claim --next (relaxed)", Box::new(|t| race(w, t, &cli_relaxed))),
        ("circe library, processes (full)", Box::new(|t| lib_race(&root, w, t, Durability::Full))),
        (
            "circe library, processes (relaxed)",
            Box::new(|t| lib_race(&root, w, t, Durability::Relaxed)),
        ),
        ("sqlite3 claim", Box::new(|t| race(w, t, &sqlite_claim))),
        ("naive mv", Box::new(|t| race(w, t, &mv_claim))),
        ("process floor: /bin/true (no claim at all)", Box::new(|t| race(w, t, &spawn))),
    ];
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let slices = secs.round().max(1.0) as usize;
    #[expect(clippy::cast_precision_loss)]
    let slice = secs / slices as f64;
    let mut acc: Vec<RaceOut> =
        claimers.iter().map(|_| (Vec::new(), Vec::new(), 0, false, 0.0)).collect();
    for r in 0..slices {
        eprintln!("contention: slice {}/{slices} ({slice:.1}s per claimer)", r + 1);
        let mut order: Vec<usize> = (0..claimers.len()).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        for k in order {
            if acc[k].3 {
                continue; // drained: its queue is empty
            }
            let (grants, lat, attempts, drained, took) = (claimers[k].1)(slice);
            let sum = &mut acc[k];
            sum.0.extend(grants);
            sum.1.extend(lat);
            sum.2 += attempts;
            sum.3 |= drained;
            sum.4 += took;
        }
    }

    let mut results = Vec::new();
    let mut all_grants: Vec<(usize, String)> = Vec::new();
    for ((label, _), (grants, lat, attempts, drained, took)) in claimers.iter().zip(acc) {
        let circe_row = label.starts_with("circe");
        if circe_row {
            all_grants.extend(grants.iter().cloned());
        }
        let label = label.replace("library, processes", &format!("library, {w} processes"));
        let floor = label.starts_with("process floor");
        results.push(Contention {
            label,
            claims: grants.len(),
            attempts,
            secs: took,
            double: if floor { 0 } else { doubles(&grants) },
            lost: 0,
            lat,
            drained,
        });
    }
    // Double grants across all four circe claimers (a task granted twice anywhere).
    let across = doubles(&all_grants);
    // Lost tasks: every task must be where its records say, granted ones with their grantee.
    let ws = Workspace::open(&RootSpec::Path(root.clone())).expect("open root");
    let owner_of: HashMap<&str, usize> =
        all_grants.iter().map(|(w, id)| (id.as_str(), *w)).collect();
    let mut lost = 0;
    for i in 0..n {
        let id = task_id(i);
        let ok = match ws.engine.peek(&TaskId::new(id.as_str()).expect("a task id")) {
            Ok(Some(st)) => match owner_of.get(id.as_str()) {
                Some(w) => {
                    let me = format!("w{w}");
                    st.rec.owner.as_deref() == Some(me.as_str())
                        && st.location == Some(Mailbox::Inbox(AgentName::new(me).expect("name")))
                }
                None => st.rec.owner.is_none() && st.location == Some(Mailbox::NewMessages),
            },
            _ => false,
        };
        if !ok {
            lost += 1;
        }
    }
    let granted_elsewhere = all_grants.iter().filter(|(_, id)| !id.starts_with('T')).count();
    // sqlite: every row still there, and as many claimed rows as grants.
    let claimed: usize =
        must(&mut sqlite(&db, "SELECT count(*) FROM tasks WHERE status='claimed'"))
            .trim()
            .parse()
            .unwrap_or(0);
    let total: usize =
        must(&mut sqlite(&db, "SELECT count(*) FROM tasks")).trim().parse().unwrap_or(0);
    // mv: every file in exactly one folder.
    let mut files = std::fs::read_dir(mvdir.join("NEW_MESSAGES")).unwrap().count();
    for wi in 0..w {
        files += std::fs::read_dir(mvdir.join(format!("AGENTS/w{wi}/INBOX"))).unwrap().count();
    }
    for r in &mut results {
        if r.label.starts_with("circe") {
            r.double = r.double.max(across);
            r.lost = lost + granted_elsewhere;
        } else if r.label.starts_with("sqlite") {
            r.lost = n.abs_diff(total) + claimed.abs_diff(r.claims);
        } else if r.label.starts_with("naive") {
            r.lost = n.abs_diff(files);
        }
    }
    results
}

/// One library worker process (`compare --lib-worker ROOT AGENT SECS`): opens the root
/// once, then calls `circe::ops::claim_next` back to back for SECS (the same locks,
/// renames, records, board and event-log writes and fsyncs as `circe claim --next`, minus
/// the process start). Prints `ms task` per grant, `ms -` per lost race, `empty` when
/// the queue ran dry. Durability comes from CIRCE_DURABILITY, as for the CLI.
pub(crate) fn lib_worker(args: &[String]) {
    use std::io::Write as _;
    let [root, agent, secs] = args else { usage("--lib-worker ROOT AGENT SECS") };
    let secs: f64 = secs.parse().unwrap_or_else(|_| usage("bad SECS"));
    let ws = Workspace::open(&RootSpec::Path(root.into())).expect("open root");
    let agent = &AgentName::new(agent.as_str()).expect("an agent name");
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut out = String::new();
    while Instant::now() < deadline {
        let t = Instant::now();
        let r = circe::ops::claim_next(&ws, agent, WORKER_ROLE, None);
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        match r {
            Ok(o) => {
                let _ = writeln!(out, "{ms:.4} {}", o.task);
            }
            Err(e) if e.kind == circe::error::Kind::NothingToClaim => {
                out.push_str("empty\n");
                break;
            }
            Err(_) => {
                let _ = writeln!(out, "{ms:.4} -");
            }
        }
    }
    std::io::stdout().write_all(out.as_bytes()).expect("write results");
}

/// `workers` library worker processes started together on `root`.
pub(crate) fn lib_race(root: &Path, workers: usize, secs: f64, d: Durability) -> RaceOut {
    let me = std::env::current_exe().expect("bench binary path");
    let start = Instant::now();
    let children: Vec<_> = (0..workers)
        .map(|w| {
            circe_env(Command::new(&me), root, &format!("w{w}"), d)
                .args([
                    "--lib-worker",
                    &root.to_string_lossy(),
                    &format!("w{w}"),
                    &secs.to_string(),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a library worker")
        })
        .collect();
    let (mut grants, mut lat, mut attempts, mut drained) = (Vec::new(), Vec::new(), 0, false);
    for (w, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().expect("library worker");
        assert!(out.status.success(), "library worker w{w} failed");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if line == "empty" {
                drained = true;
                continue;
            }
            attempts += 1;
            let (ms, task) = line.split_once(' ').unwrap_or((line, "-"));
            if task != "-" {
                grants.push((w, task.to_string()));
                lat.push(ms.parse().unwrap_or(0.0));
            }
        }
    }
    (grants, lat, attempts, drained, start.elapsed().as_secs_f64())
}

pub(crate) fn report_contention(opts: &Opts, res: &[Contention], out: &mut String) {
    let _ = writeln!(
        out,
        "\n## Contention: {} workers claiming for {} s per claimer, in 1 s slices interleaved \
         with the other claimers ({} waiting tasks at start)\n",
        opts.workers, opts.secs, opts.contention_tasks
    );
    let _ = writeln!(
        out,
        "| claimer | claims | claims/s | attempts | p50 ms | p95 ms | double grants | lost tasks |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in res {
        #[expect(clippy::cast_precision_loss)]
        let rate = r.claims as f64 / r.secs;
        let _ = writeln!(
            out,
            "| {}{} | {} | {:.0} | {} | {:.2} | {:.2} | {} | {} |",
            r.label,
            if r.drained { " (queue drained)" } else { "" },
            r.claims,
            rate,
            r.attempts,
            percentile(&r.lat, 0.5),
            percentile(&r.lat, 0.95),
            r.double,
            r.lost
        );
    }
    let _ = writeln!(
        out,
        "\nLost tasks for circe: tasks (of all {}) whose message is not in the grantee's INBOX \
         with matching records, or not in NEW_MESSAGES when never granted; checked once after \
         all four circe runs (double grants are counted across them too). The library rows are \
         {} processes each calling `circe::ops::claim_next` in a loop: the same claim, without \
         starting a process per claim.",
        opts.contention_tasks, opts.workers
    );
}
