//! `cargo bench --bench compare`: circe's per-command wall time against simple baselines.
//!
//! Every figure is the wall time of one whole process (spawn to exit), measured from here.
//! All roots are populated first; then each round runs every operation at every size,
//! circe and its baselines back to back (A B A B), so a noisy shared machine hits both
//! sides alike. Reported: medians, and the median of the per-round ratios circe/baseline.
//!
//! Options (after `--`):
//!   --sizes 100,1000,10000,100000   existing tasks per root
//!   --rounds N                      samples per operation and size (default 15)
//!   --quick                         sizes 100,1000, 7 rounds, 2 s contention, 20000 tasks
//!   --workers N                     concurrent claimers in the contention run (default 8)
//!   --secs S                        contention run length per side (default 8)
//!   --contention-tasks N            waiting tasks for the contention run (default 60000: four circe runs draw from one root)
//!   --no-contention, --no-memory, --no-rounds, --no-limits, --no-chat, --no-streams, --no-pg,
//!   --no-archive                    skip those sections
//!   --archive-tasks N               finished tasks (10 messages each) in the archive run
//!                                   (default 10000; 100000 is the full size, ~1M messages)
//!   --pg-only                       only the PostgreSQL section (local vs database claims)
//!   --pg-claimers                   only its library claimers, direct (to profile them)
//!   --against OLD                   only compare this circe with the circe binary OLD:
//!                                   claim <id> and claim --next, durable, paired rounds
//!   --circe PATH                    bench another circe binary (e.g. a copy built from
//!                                   an older commit, for before/after figures); without
//!                                   it, a plain `cargo build --release` the bench makes
//!                                   in target/bench-plain (binary.rs: never a test build)
//!   --dir PATH                      where roots are made (default: a fresh folder under
//!                                   the cargo target tmp dir); removed at the end
//!   --keep                          do not remove the roots
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test and bench harnesses set up and inspect roots directly"
)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::chat::{chat, report_chat};
use crate::contention::{contention, lib_worker, report_contention};
use crate::limits::limits;
use crate::procs::{populate_circe, populate_mv, populate_sqlite};
use crate::rounds::{Sized, memory, report_rounds, round};
use crate::stats::Samples;
use crate::verdicts::verdicts;

mod ab;
mod archive;
mod binary;
mod chat;
mod contention;
mod limits;
mod pg;
#[path = "../../tests/support/pg_cluster.rs"]
#[allow(dead_code, reason = "shared with the test suites")]
mod pg_cluster;
mod procs;
mod rounds;
mod stats;
mod streams;
mod verdicts;

/// The circe binary under test: `--circe PATH`, else a plain release build the bench makes
/// (never the test build cargo made for this bench: binary.rs).
pub(crate) static CIRCE_BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

pub(crate) fn circe_bin() -> &'static Path {
    CIRCE_BIN.get_or_init(binary::build_plain)
}
pub(crate) const SQLITE: &str = "/usr/bin/sqlite3";

#[expect(clippy::struct_excessive_bools)] // command-line switches
pub(crate) struct Opts {
    pub(crate) sizes: Vec<usize>,
    pub(crate) rounds: usize,
    pub(crate) workers: usize,
    pub(crate) secs: f64,
    pub(crate) contention_tasks: usize,
    pub(crate) contention: bool,
    pub(crate) memory: bool,
    pub(crate) per_call: bool,
    pub(crate) limits: bool,
    pub(crate) chat: bool,
    pub(crate) archive: bool,
    pub(crate) archive_tasks: usize,
    pub(crate) streams: bool,
    pub(crate) pg: bool,
    pub(crate) pg_claimers_only: bool,
    pub(crate) dir: PathBuf,
    pub(crate) keep: bool,
    pub(crate) against: Option<PathBuf>,
}

pub(crate) fn parse_opts() -> Opts {
    let mut o = Opts {
        sizes: vec![100, 1000, 10_000, 100_000],
        rounds: 15,
        workers: 8,
        secs: 8.0,
        contention_tasks: 60_000,
        contention: true,
        memory: true,
        per_call: true,
        limits: true,
        chat: true,
        archive: true,
        archive_tasks: 10_000,
        streams: true,
        pg: true,
        pg_claimers_only: false,
        dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("circe-compare-{}", std::process::id())),
        keep: false,
        against: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut sizes, mut rounds, mut secs, mut ctasks) = (None, None, None, None);
    let mut atasks = None;
    let mut i = 0;
    let value = |i: &mut usize| -> String {
        *i += 1;
        args.get(*i).cloned().unwrap_or_else(|| usage(&format!("{} needs a value", args[*i - 1])))
    };
    while i < args.len() {
        match args[i].as_str() {
            "--sizes" => {
                sizes = Some(
                    value(&mut i)
                        .split(',')
                        .map(|s| s.trim().parse().unwrap_or_else(|_| usage("bad --sizes")))
                        .collect(),
                );
            }
            "--rounds" => {
                rounds = Some(value(&mut i).parse().unwrap_or_else(|_| usage("bad --rounds")));
            }
            "--quick" => {
                sizes.get_or_insert(vec![100, 1000]);
                rounds.get_or_insert(7);
                secs.get_or_insert(2.0);
                ctasks.get_or_insert(20_000);
                atasks.get_or_insert(1000);
            }
            "--workers" => {
                o.workers = value(&mut i).parse().unwrap_or_else(|_| usage("bad --workers"));
            }
            "--secs" => secs = Some(value(&mut i).parse().unwrap_or_else(|_| usage("bad --secs"))),
            "--contention-tasks" => {
                ctasks =
                    Some(value(&mut i).parse().unwrap_or_else(|_| usage("bad --contention-tasks")));
            }
            "--no-contention" => o.contention = false,
            "--no-memory" => o.memory = false,
            "--no-rounds" => o.per_call = false,
            "--no-limits" => o.limits = false,
            "--no-chat" => o.chat = false,
            "--no-archive" => o.archive = false,
            "--archive-tasks" => {
                atasks =
                    Some(value(&mut i).parse().unwrap_or_else(|_| usage("bad --archive-tasks")));
            }
            "--no-streams" => o.streams = false,
            "--no-pg" => o.pg = false,
            "--pg-only" => only_pg(&mut o),
            "--pg-claimers" => {
                only_pg(&mut o);
                o.pg_claimers_only = true;
            }
            "--circe" => {
                let _ = CIRCE_BIN.set(PathBuf::from(value(&mut i)));
            }
            "--dir" => o.dir = PathBuf::from(value(&mut i)),
            "--against" => o.against = Some(PathBuf::from(value(&mut i))),
            "--keep" => o.keep = true,
            "--bench" => {} // cargo bench passes this to every bench binary
            other => usage(&format!("unknown option {other}")),
        }
        i += 1;
    }
    if let Some(s) = sizes {
        o.sizes = s;
    }
    o.rounds = rounds.unwrap_or(o.rounds).max(1);
    o.secs = secs.unwrap_or(o.secs);
    o.contention_tasks = ctasks.unwrap_or(o.contention_tasks);
    o.archive_tasks = atasks.unwrap_or(o.archive_tasks);
    o.sizes.sort_unstable();
    o.sizes.dedup();
    o
}

/// Every section off but the PostgreSQL one.
fn only_pg(o: &mut Opts) {
    o.per_call = false;
    o.contention = false;
    o.memory = false;
    o.limits = false;
    o.chat = false;
    o.streams = false;
    o.archive = false;
}

pub(crate) fn usage(msg: &str) -> ! {
    eprintln!("compare: {msg}");
    eprintln!(
        "options: --sizes 100,1000 --rounds N --quick --workers N --secs S \
         --contention-tasks N --no-contention --no-memory --no-rounds --no-limits --no-chat \
         --no-archive --archive-tasks N \
         --no-streams --no-pg --pg-only --pg-claimers --against OLD --circe PATH --dir PATH --keep"
    );
    std::process::exit(2);
}

fn machine(dir: &Path) -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    // findmnt names ext4 (stat -f says "ext2/ext3" for it: same magic number).
    let fs = Command::new("findmnt")
        .args(["-n", "-o", "FSTYPE", "--target"])
        .arg(dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let sqlite_version = Command::new(SQLITE).arg("-version").output().map_or_else(
        |_| "MISSING".into(),
        |o| String::from_utf8_lossy(&o.stdout).split_whitespace().next().unwrap_or("").to_string(),
    );
    format!(
        "date {date}; nproc {}; cpu {cpu}; kernel {}; bench dir fs {fs} ({}); load {}; sqlite3 {sqlite_version}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        read("/proc/sys/kernel/osrelease"),
        dir.display(),
        read("/proc/loadavg"),
    )
}

/// The SQLite baseline is Debian's `sqlite3` command: install it when we can (root + apt).
fn install_sqlite3() {
    eprintln!("compare: {SQLITE} is missing: trying apt-get install sqlite3");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    if !apt(&["install", "-y", "-q", "sqlite3"]) {
        let _ = apt(&["update", "-q"]);
        let _ = apt(&["install", "-y", "-q", "sqlite3"]);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--lib-worker") {
        lib_worker(&args[2..]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--sql-claim") {
        pg::sql_claim(&args[2..]);
        return;
    }
    let opts = parse_opts();
    // The binaries named are checked before anything is built or populated; then the one to
    // measure is built if none was named.
    let named = CIRCE_BIN.get().map(|bin| binary::refuse_test_build(bin, "--circe"));
    let old_version =
        opts.against.as_deref().map(|old| binary::refuse_test_build(old, "--against"));
    let circe_version = named.unwrap_or_else(|| binary::plain_version(circe_bin()));
    if !Path::new(SQLITE).exists() {
        install_sqlite3();
    }
    if !Path::new(SQLITE).exists() {
        eprintln!(
            "compare: {SQLITE} is missing and could not be installed (apt-get install sqlite3); the sqlite baselines need it"
        );
        std::process::exit(1);
    }
    std::fs::create_dir_all(&opts.dir).expect("make bench dir");
    let mut out = String::new();
    let _ = writeln!(out, "# circe compare\n\nmachine: {}", machine(&opts.dir));
    let _ = writeln!(out, "circe binary: {} ({circe_version})", circe_bin().display());
    if let (Some(old), Some(v)) = (&opts.against, old_version) {
        let _ = writeln!(out, "against: {} ({v})", old.display());
    }
    if let Some(old) = &opts.against {
        ab::against(&opts, old, &mut out);
        println!("{out}");
        if !opts.keep {
            let _ = std::fs::remove_dir_all(&opts.dir);
        }
        return;
    }

    let mut sized = Vec::new();
    for &n in opts.sizes.iter().filter(|_| opts.per_call) {
        let t = Instant::now();
        eprintln!("populating {n} tasks ...");
        let dir = opts.dir.join(format!("n{n}"));
        let root = populate_circe(&dir.join("circe"), n, 2);
        let mv = dir.join("mv");
        let mv_names = populate_mv(&mv, n, 1);
        let db = dir.join("tasks.db");
        populate_sqlite(&db, n);
        eprintln!("  done in {:.1}s", t.elapsed().as_secs_f64());
        sized.push(Sized { n, root, mv, mv_names, db });
    }
    let mut samples = Samples::new();
    let t = Instant::now();
    for r in 0..opts.rounds {
        eprintln!("round {}/{} ({:.0}s)", r + 1, opts.rounds, t.elapsed().as_secs_f64());
        for s in &sized {
            round(r, s, &mut samples);
        }
    }
    report_rounds(&opts, &samples, &mut out);
    let cont = if opts.contention { contention(&opts, &opts.dir) } else { Vec::new() };
    if !cont.is_empty() {
        report_contention(&opts, &cont, &mut out);
    }
    if opts.memory
        && let Some(s) = sized.last()
    {
        memory(s, &mut out);
    }
    if opts.limits {
        eprintln!("message limits ...");
        limits(opts.rounds, &opts.dir, &mut out);
    }
    if opts.chat {
        report_chat(&chat(&opts, &opts.dir), &mut out);
    }
    if opts.archive {
        archive::archive(&opts, opts.archive_tasks, &mut out);
    }
    if opts.streams {
        eprintln!("streams ...");
        streams::report_streams(&streams::streams(&opts, &opts.dir), &mut out);
    }
    if opts.pg {
        pg::section(&opts, &opts.dir, &mut out);
    }
    verdicts(&opts, &samples, &cont, &mut out);
    let _ = writeln!(
        out,
        "\nend load: {}",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    println!("{out}");
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&opts.dir);
    }
}
