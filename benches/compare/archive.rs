//! The archive: `circe archive` of a root of N finished tasks (10 messages each, made through
//! the library) against the floor of the same work done by standard tools on a copy of the
//! same files (`tar --zstd -cf` of LOGS and TASKS, then `rm -r` of them); its peak RSS; a run
//! with nothing to do over the archived root; and `doctor`, `tasks`, `claim --next` on that
//! root against a root with the same live tasks and an empty archive (paired rounds), right
//! after the run and again once the file system reuses the inodes the run freed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::procs::{circe, must, timed};
use crate::rounds::peak_kib;
use crate::stats::{median, paired_ratio};
use crate::{Opts, circe_bin};
use circe::boxes::Mailbox;
use circe::config::Durability;
use circe::engine::RootSpec;
use circe::message::{Format, Message};
use circe::names::{AgentName, CheckName, TaskId};
use circe::task::Status;
use circe::workspace::Workspace;

const T0: &str = "2030-01-01T00:00:00Z";
const LATER: &str = "2030-03-01T00:00:00Z";
/// Messages per finished task: its ticket and 9 more naming it.
const PER_TASK: usize = 10;
/// Waiting tasks in both roots of the paired rounds.
const LIVE: usize = 1000;

fn agent(s: &str) -> AgentName {
    AgentName::new(s).expect("a name")
}

/// A root with `n` finished tasks (10 messages each, all in LOGS) and `live` waiting tasks.
fn populate(dir: &Path, n: usize, live: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    must(Command::new(circe_bin()).arg("init").arg(dir));
    let root = dir.join(".circe");
    let ws = Workspace::open_with(&RootSpec::Path(root.clone()), Durability::Relaxed)
        .expect("open root");
    ws.pin_clock(circe::clock::parse(T0).unwrap());
    let (co, eng) = (agent("coordinator"), agent("engineer"));
    let passed = CheckName::new("tests_passed").unwrap();
    let open = |task: &str| {
        let mut m = Message::new(Format::Circe);
        m.to = Some("all".into());
        m.intent = Some("implement_feature".into());
        m.task_id = Some(task.into());
        m.body = format!("## Summary\nbenchmark task {task}\n");
        circe::ops::send(&ws, &co, m).expect("send");
    };
    for i in 0..n {
        let task = format!("A{i:06}");
        let id = TaskId::new(&task).unwrap();
        open(&task);
        circe::ops::claim(&ws, &eng, "engineer", &id, None).expect("claim");
        circe::ops::set_status(&ws, &eng, &id, Status::InProgress, None, None).expect("start");
        circe::ops::check_set(&ws, &eng, &id, &passed, true, None).expect("check");
        let done = circe::ops::set_status(&ws, &eng, &id, Status::Completed, None, None)
            .expect("complete");
        // Filed into LOGS (`done` by key would search every box for it: quadratic here).
        ws.engine
            .move_message(&Mailbox::Inbox(eng.clone()), &Mailbox::Logs, &done.message)
            .expect("file");
        for k in 1..PER_TASK {
            let mut m = Message::new(Format::Circe);
            m.from = Some("engineer".into());
            m.to = Some("coordinator".into());
            m.intent = Some("inform".into());
            m.task_id = Some(task.clone());
            m.status = Some("new".into());
            m.created_at = circe::clock::parse(T0);
            m.msg_id = Some(format!("{task}-{k}"));
            m.body = format!("## Summary\nnote {k} on {task}\n");
            let name = format!("20300101_000000_engineer-coordinator_inform_{task}.{}.md", k + 1);
            ws.engine
                .deliver(circe::message::render(&m).as_bytes(), &name, &[Mailbox::Logs])
                .expect("deliver");
        }
    }
    for i in 0..live {
        open(&format!("L{i:06}"));
    }
    root
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map_or(0, |rd| rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_file())).count())
}

#[expect(clippy::many_single_char_names, reason = "one section, step after step")]
pub(crate) fn archive(opts: &Opts, n: usize, out: &mut String) {
    let base = opts.dir.join(format!("archive-{n}"));
    let t = Instant::now();
    eprintln!(
        "archive: populating {n} finished tasks ({} messages) and {LIVE} waiting ...",
        n * PER_TASK
    );
    let a = populate(&base.join("a"), n, LIVE);
    let e = populate(&base.join("e"), 0, LIVE);
    must(Command::new("cp").arg("-a").arg(base.join("a")).arg(base.join("b")));
    let b = base.join("b/.circe");
    let files = count_files(&a.join("LOGS")) + count_files(&a.join("TASKS"));
    eprintln!("  done in {:.1}s ({files} files in LOGS and TASKS)", t.elapsed().as_secs_f64());
    // Each side starts with nothing waiting to be written back: populating and `cp -a`
    // leave about a million dirty inodes, and their writeback would otherwise run during
    // whichever is timed first.
    must(&mut Command::new("sync"));
    // circe archive, durable (the default), with its peak RSS (/usr/bin/time %M).
    let mut cmd = circe(&a, "coordinator", Durability::Full);
    cmd.env("CIRCE_NOW", LATER).arg("archive");
    let start = Instant::now();
    let rss = peak_kib(&mut cmd);
    let circe_s = start.elapsed().as_secs_f64();
    // The floor: the same files through tar --zstd, then rm.
    must(&mut Command::new("sync"));
    let start = Instant::now();
    must(
        Command::new("tar")
            .arg("--zstd")
            .arg("-cf")
            .arg(base.join("b.tar.zst"))
            .arg("-C")
            .arg(&b)
            .args(["LOGS", "TASKS"]),
    );
    let tar_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    must(Command::new("rm").arg("-r").arg(b.join("LOGS")).arg(b.join("TASKS")));
    let rm_s = start.elapsed().as_secs_f64();
    let floor = tar_s + rm_s;
    let archived = std::fs::read_dir(a.join("ARCHIVE")).map_or(0, Iterator::count);
    let tar_bytes = std::fs::metadata(base.join("b.tar.zst")).map_or(0, |m| m.len());
    let seg_bytes: u64 = walk_bytes(&a.join("ARCHIVE"), ".tar.zst");
    // A run with nothing to do, over the archived root.
    let mut noop = Vec::new();
    for _ in 0..opts.rounds {
        let (ms, ok, _) = timed(
            circe(&a, "coordinator", Durability::Full).env("CIRCE_NOW", LATER).arg("archive"),
            false,
        );
        assert!(ok, "the no-op archive run failed");
        noop.push(ms);
    }
    // doctor, tasks, claim --next: archived root vs empty archive, paired rounds, right
    // after the run and once the filesystem reuses the inodes the run freed.
    let right_after = paired_rows(&a, &e, opts.rounds);
    must(&mut Command::new("sync"));
    eprintln!("archive: waiting {} s for the freed inodes ...", SETTLE.as_secs());
    std::thread::sleep(SETTLE);
    let settled = paired_rows(&a, &e, opts.rounds);
    let _ = writeln!(
        out,
        "\n## Archive: {n} finished tasks, {} messages ({files} files), {LIVE} waiting\n",
        n * PER_TASK
    );
    let _ = writeln!(out, "| work | seconds | bytes written |\n|---|---:|---:|");
    let _ = writeln!(
        out,
        "| circe archive (durable: fsync, verify, journal) | {circe_s:.2} | {seg_bytes} |"
    );
    let _ = writeln!(out, "| tar --zstd -cf LOGS TASKS | {tar_s:.2} | {tar_bytes} |");
    let _ = writeln!(out, "| rm -r LOGS TASKS | {rm_s:.2} | |");
    let _ = writeln!(out, "| floor (tar + rm) | {floor:.2} | |");
    let _ = writeln!(
        out,
        "\nratio circe archive / floor: **{:.2}x** (target <= 1.5x); ARCHIVE/ holds {archived} entries",
        circe_s / floor
    );
    let _ = writeln!(
        out,
        "peak RSS of circe archive: **{} KiB** (target <= 65536)",
        rss.map_or("?".into(), |k| k.to_string())
    );
    let _ = writeln!(
        out,
        "a run with nothing to do over {n} archived tasks: median **{:.1} ms** of {} (target <= 50 ms)",
        median(&noop),
        noop.len()
    );
    let _ = writeln!(
        out,
        "\n| command | archived root ms | empty archive ms | paired ratio (target <= 1.1) | right after the run: archived / empty ms, ratio |\n|---|---:|---:|---:|---|"
    );
    for ((name, a_ms, e_ms, r), (_, a0, e0, r0)) in settled.iter().zip(&right_after) {
        let _ = writeln!(
            out,
            "| {name} | {a_ms:.2} | {e_ms:.2} | {r:.2} | {a0:.2} / {e0:.2}, {r0:.2} |"
        );
    }
}

/// How long after a `sync` a file system without a journal (ext4) goes on skipping the
/// inodes a run freed when it creates a file (`recently_deleted`: 30 s once the inode
/// table is written back), plus a margin.
const SETTLE: Duration = Duration::from_secs(35);

/// `doctor`, `tasks` and `claim --next` on the archived root `a` and the root `e` with an
/// empty archive, `rounds` paired rounds each: (command, median ms on `a`, on `e`, paired
/// ratio).
fn paired_rows(a: &Path, e: &Path, rounds: usize) -> Vec<(&'static str, f64, f64, f64)> {
    let mut rows = Vec::new();
    for (name, args) in [
        ("doctor", vec!["doctor"]),
        ("tasks", vec!["tasks"]),
        ("claim --next", vec!["claim", "--next"]),
    ] {
        let (mut xa, mut xe) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let run = |root: &Path| {
                let (ms, ok, _) = timed(
                    circe(root, "w0", Durability::Full)
                        .env("CIRCE_NOW", LATER)
                        .env("CIRCE_AGENT", "engineer")
                        .args(&args),
                    false,
                );
                assert!(ok, "{name} failed");
                ms
            };
            xa.push(run(a));
            xe.push(run(e));
        }
        rows.push((name, median(&xa), median(&xe), paired_ratio(&xa, &xe)));
    }
    rows
}

fn walk_bytes(dir: &Path, suffix: &str) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            total += walk_bytes(&p, suffix);
        } else if p.to_string_lossy().ends_with(suffix) {
            total += e.metadata().map_or(0, |m| m.len());
        }
    }
    total
}
