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
//!   --quick                         sizes 100,1000, 7 rounds, 2 s contention
//!   --workers N                     concurrent claimers in the contention run (default 8)
//!   --secs S                        contention run length per side (default 8)
//!   --contention-tasks N            waiting tasks for the contention run (default 60000: four circe runs draw from one root)
//!   --no-contention, --no-memory, --no-rounds    skip those sections
//!   --circe PATH                    bench another circe binary (e.g. a copy built from
//!                                   an older commit, for before/after figures)
//!   --dir PATH                      where roots are made (default: a fresh folder under
//!                                   the cargo target tmp dir); removed at the end
//!   --keep                          do not remove the roots
#![allow(
    clippy::disallowed_methods,
    reason = "test and bench harnesses set up and inspect roots directly"
)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use circe::message::{Format, Message};
use circe::store::{Durability, Mailbox};
use circe::workspace::Workspace;

/// The circe binary under test: `--circe PATH`, else the one cargo built for this bench.
static CIRCE_BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn circe_bin() -> &'static Path {
    CIRCE_BIN.get_or_init(|| PathBuf::from(env!("CARGO_BIN_EXE_circe")))
}
const SQLITE: &str = "/usr/bin/sqlite3";

#[allow(clippy::struct_excessive_bools)] // command-line switches
struct Opts {
    sizes: Vec<usize>,
    rounds: usize,
    workers: usize,
    secs: f64,
    contention_tasks: usize,
    contention: bool,
    memory: bool,
    per_call: bool,
    dir: PathBuf,
    keep: bool,
}

fn parse_opts() -> Opts {
    let mut o = Opts {
        sizes: vec![100, 1000, 10_000, 100_000],
        rounds: 15,
        workers: 8,
        secs: 8.0,
        contention_tasks: 60_000,
        contention: true,
        memory: true,
        per_call: true,
        dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("circe-compare-{}", std::process::id())),
        keep: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut sizes, mut rounds, mut secs, mut ctasks) = (None, None, None, None);
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
                ctasks.get_or_insert(5000);
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
            "--circe" => {
                let _ = CIRCE_BIN.set(PathBuf::from(value(&mut i)));
            }
            "--dir" => o.dir = PathBuf::from(value(&mut i)),
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
    o.sizes.sort_unstable();
    o.sizes.dedup();
    o
}

fn usage(msg: &str) -> ! {
    eprintln!("compare: {msg}");
    eprintln!(
        "options: --sizes 100,1000 --rounds N --quick --workers N --secs S \
         --contention-tasks N --no-contention --no-memory --no-rounds --circe PATH --dir PATH --keep"
    );
    std::process::exit(2);
}

// ---- running processes ------------------------------------------------------------------

/// Wall time of one process in ms, its exit status and its stdout (when `capture`).
fn timed(cmd: &mut Command, capture: bool) -> (f64, bool, String) {
    cmd.stdin(Stdio::null()).stderr(Stdio::null());
    cmd.stdout(if capture { Stdio::piped() } else { Stdio::null() });
    let start = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    (ms, out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn circe(root: &Path, agent: &str, durability: Durability) -> Command {
    circe_env(Command::new(circe_bin()), root, agent, durability)
}

fn circe_env(mut c: Command, root: &Path, agent: &str, durability: Durability) -> Command {
    c.env("CIRCE_ROOT", root).env("CIRCE_AGENT", agent).env(
        "CIRCE_DURABILITY",
        match durability {
            Durability::Full => "full",
            Durability::Relaxed => "relaxed",
        },
    );
    c
}

fn must(cmd: &mut Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sqlite(db: &Path, sql: &str) -> Command {
    let mut c = Command::new(SQLITE);
    c.arg("-cmd").arg(".timeout 10000").arg(db).arg(sql);
    c
}

/// The task id field of `circe claim --json` output.
fn claimed_task(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("task").and_then(|t| t.as_str()).map(str::to_string)
}

// ---- populating --------------------------------------------------------------------------

fn task_id(i: usize) -> String {
    format!("T{i:06}")
}

const WORKER_ROLE: &str = "engineer";
/// Tasks go to `all`: the root also has an agent named `engineer`, and a task addressed
/// to an agent name is for that agent only.
const TO: &str = "all";

/// A circe root under `dir` with agents w0..w(workers-1) and `n` waiting tasks, made
/// through the library with relaxed durability (populating is not measured).
fn populate_circe(dir: &Path, n: usize, workers: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    must(Command::new(circe_bin()).arg("init").arg(dir));
    let root = dir.join(".circe");
    for w in 0..workers.max(2) {
        must(circe(&root, "coordinator", Durability::Relaxed).args([
            "agent",
            "add",
            &format!("w{w}"),
            "--role",
            WORKER_ROLE,
        ]));
    }
    let mut ws = Workspace::open(Some(&root)).expect("open root");
    ws.store = ws.store.clone().with_durability(Durability::Relaxed);
    for i in 0..n {
        let mut m = Message::new(Format::Circe);
        m.to = Some(TO.into());
        m.intent = Some("implement_feature".into());
        m.task_id = Some(task_id(i));
        m.body = format!("## Summary\nbenchmark task {i}\n");
        circe::boxes::send(&ws, "coordinator", m).expect("populate send");
    }
    root
}

/// The naive shell layout: NEW_MESSAGES with `n` files and one INBOX per worker.
fn populate_mv(dir: &Path, n: usize, workers: usize) -> Vec<String> {
    std::fs::create_dir_all(dir.join("NEW_MESSAGES")).unwrap();
    for w in 0..workers.max(1) {
        std::fs::create_dir_all(dir.join(format!("AGENTS/w{w}/INBOX"))).unwrap();
    }
    let names: Vec<String> = (0..n).map(|i| format!("{}.md", task_id(i))).collect();
    for (i, name) in names.iter().enumerate() {
        std::fs::write(dir.join("NEW_MESSAGES").join(name), format!("task {i}\n")).unwrap();
    }
    names
}

/// SQLite with the same tasks (default rollback journal, synchronous=FULL: durable).
fn populate_sqlite(db: &Path, n: usize) {
    let sql = format!(
        "CREATE TABLE tasks(id TEXT PRIMARY KEY, status TEXT NOT NULL, owner TEXT, \
         priority INTEGER NOT NULL, created INTEGER NOT NULL, intent TEXT, body TEXT);\
         CREATE INDEX waiting ON tasks(status, priority, created);\
         WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x+1 FROM c WHERE x<{n}-1) \
         INSERT INTO tasks SELECT printf('T%06d', x), 'new', NULL, 1, x, \
         'implement_feature', 'benchmark task ' || x FROM c;"
    );
    must(Command::new(SQLITE).arg(db).arg(sql));
}

// ---- statistics -------------------------------------------------------------------------

fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if (p - 0.5).abs() < f64::EPSILON && s.len().is_multiple_of(2) {
        return f64::midpoint(s[s.len() / 2 - 1], s[s.len() / 2]);
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let i = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[i]
}

/// Median of the per-round ratios a[i]/b[i].
fn paired_ratio(a: &[f64], b: &[f64]) -> f64 {
    let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    median(&r)
}

/// Samples: (operation, size) -> variant -> per-round ms.
type Samples = BTreeMap<(usize, usize), BTreeMap<&'static str, Vec<f64>>>;

fn push(s: &mut Samples, op: usize, size: usize, variant: &'static str, ms: f64) {
    s.entry((op, size)).or_default().entry(variant).or_default().push(ms);
}

// ---- the per-invocation rounds -------------------------------------------------------------

struct Sized {
    n: usize,
    root: PathBuf,
    mv: PathBuf,
    mv_names: Vec<String>,
    db: PathBuf,
}

const OPS: [&str; 6] =
    ["send (create)", "claim <id>", "release", "claim --next", "tasks (board)", "process floor"];

/// Which baseline each operation is compared with, by variant name.
fn baseline_of(op: usize) -> &'static str {
    match op {
        0 => "sqlite insert",
        1 | 3 => "sqlite claim",
        2 => "sqlite release",
        4 => "sqlite list",
        _ => "/bin/true",
    }
}

#[allow(clippy::too_many_lines)] // one round, every operation in order
fn round(r: usize, s: &Sized, samples: &mut Samples) {
    let n = s.n;
    let flip = r % 2 == 1; // alternate who goes first each round
    let modes = if flip {
        [Durability::Relaxed, Durability::Full]
    } else {
        [Durability::Full, Durability::Relaxed]
    };
    let variant = |d: Durability| if d == Durability::Full { "circe" } else { "circe relaxed" };

    // send: a new task per sample; sqlite: one INSERT.
    for (k, d) in modes.iter().enumerate() {
        let (ms, ok, _) = timed(
            circe(&s.root, "coordinator", *d).args([
                "send",
                "--to",
                TO,
                "--intent",
                "implement_feature",
                "--task",
                &format!("S{r}-{k}"),
                "--summary",
                "benchmark send",
            ]),
            false,
        );
        assert!(ok, "circe send failed at n={n}");
        push(samples, 0, n, variant(*d), ms);
    }
    let (ms, ok, _) = timed(
        &mut sqlite(
            &s.db,
            &format!(
                "INSERT INTO tasks VALUES('S{r}','new',NULL,1,{},'implement_feature','x')",
                n + r
            ),
        ),
        false,
    );
    assert!(ok);
    push(samples, 0, n, "sqlite insert", ms);

    // claim by id and release: tasks from the young end, away from the --next head.
    let mut mv_order: Vec<usize> = vec![0, 1];
    if flip {
        mv_order.reverse();
    }
    for (k, d) in modes.iter().enumerate() {
        let idx = n - 1 - (2 * r + k) % n;
        let id = task_id(idx);
        let (ms, ok, _) = timed(circe(&s.root, "w0", *d).args(["claim", &id]), false);
        assert!(ok, "circe claim {id} failed at n={n}");
        push(samples, 1, n, variant(*d), ms);
        let (ms, ok, _) = timed(circe(&s.root, "w0", *d).args(["release", &id]), false);
        assert!(ok, "circe release {id} failed at n={n}");
        push(samples, 2, n, variant(*d), ms);
    }
    // baselines for claim: mv and sqlite, then put back.
    let name = &s.mv_names[n - 1 - (r % n)];
    let new = s.mv.join("NEW_MESSAGES").join(name);
    let inbox = s.mv.join("AGENTS/w0/INBOX").join(name);
    for which in mv_order {
        if which == 0 {
            let (ms, ok, _) = timed(Command::new("mv").arg(&new).arg(&inbox), false);
            assert!(ok, "mv claim failed");
            push(samples, 1, n, "mv claim", ms);
            push(samples, 3, n, "mv claim", ms);
            let (ms, ok, _) = timed(Command::new("mv").arg(&inbox).arg(&new), false);
            assert!(ok, "mv back failed");
            push(samples, 2, n, "mv release", ms);
        } else {
            let (ms, ok, out) = timed(
                &mut sqlite(
                    &s.db,
                    "UPDATE tasks SET owner='w0', status='claimed' WHERE id=(SELECT id FROM tasks \
                     WHERE status='new' ORDER BY priority, created LIMIT 1) RETURNING id",
                ),
                true,
            );
            assert!(ok && !out.trim().is_empty(), "sqlite claim failed");
            push(samples, 1, n, "sqlite claim", ms);
            push(samples, 3, n, "sqlite claim", ms);
            let (ms, ok, _) = timed(
                &mut sqlite(
                    &s.db,
                    &format!(
                        "UPDATE tasks SET owner=NULL, status='new', created={} WHERE id='{}'",
                        n + 1000 + r,
                        out.trim()
                    ),
                ),
                false,
            );
            assert!(ok);
            push(samples, 2, n, "sqlite release", ms);
        }
    }

    // claim --next (then give it back, unmeasured).
    for d in modes {
        let (ms, ok, out) =
            timed(circe(&s.root, "w1", d).args(["--json", "claim", "--next"]), true);
        assert!(ok, "circe claim --next failed at n={n}");
        push(samples, 3, n, variant(d), ms);
        let id = claimed_task(&out).expect("claim --next printed no task");
        must(circe(&s.root, "w1", d).args(["release", &id]));
    }

    // the board, and sqlite's SELECT *.
    let list = |samples: &mut Samples| {
        let (ms, ok, _) = timed(circe(&s.root, "w0", Durability::Full).arg("tasks"), false);
        assert!(ok, "circe tasks failed at n={n}");
        push(samples, 4, n, "circe", ms);
    };
    let sql_list = |samples: &mut Samples| {
        let (ms, ok, _) = timed(&mut sqlite(&s.db, "SELECT * FROM tasks"), false);
        assert!(ok);
        push(samples, 4, n, "sqlite list", ms);
    };
    if flip {
        sql_list(samples);
        list(samples);
    } else {
        list(samples);
        sql_list(samples);
    }
    let (ms, ok, _) = timed(&mut Command::new("/bin/true"), false);
    assert!(ok);
    push(samples, 5, n, "/bin/true", ms);
    let (ms, _, _) = timed(Command::new(circe_bin()).arg("--version"), false);
    push(samples, 5, n, "circe", ms);
}

fn report_rounds(opts: &Opts, samples: &Samples, out: &mut String) {
    let _ = writeln!(
        out,
        "\n## Per-invocation wall time (ms, median of {} rounds; ratio = median of per-round ratios)\n",
        opts.rounds
    );
    let _ = writeln!(
        out,
        "| operation | tasks | circe | circe relaxed | baseline | baseline ms | circe/baseline | relaxed/baseline |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|---:|---:|---:|");
    for (op, name) in OPS.iter().enumerate() {
        for &n in &opts.sizes {
            let Some(v) = samples.get(&(op, n)) else { continue };
            let full = v.get("circe").map_or(&[][..], Vec::as_slice);
            let relaxed = v.get("circe relaxed").map(Vec::as_slice);
            let mut bases = vec![baseline_of(op)];
            if op == 1 || op == 3 {
                bases.push("mv claim");
            }
            if op == 2 {
                bases.push("mv release");
            }
            for b in bases {
                let base = v.get(b).map_or(&[][..], Vec::as_slice);
                let _ = writeln!(
                    out,
                    "| {name} | {n} | {:.2} | {} | {b} | {:.2} | {:.2} | {} |",
                    median(full),
                    relaxed.map_or("-".into(), |r| format!("{:.2}", median(r))),
                    median(base),
                    paired_ratio(full, base),
                    relaxed.map_or("-".into(), |r| format!("{:.2}", paired_ratio(r, base))),
                );
            }
        }
    }
}

// ---- contention ----------------------------------------------------------------------------

struct Contention {
    label: String,
    claims: usize,
    attempts: usize,
    secs: f64,
    lat: Vec<f64>,
    double: usize,
    lost: usize,
    drained: bool,
}

/// `workers` threads, each spawning claims back to back for `secs`. `claim(w)` runs one
/// claim and returns (ms, granted id, queue empty).
fn race(
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
        std::thread::sleep(Duration::from_secs_f64(secs));
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

fn doubles(grants: &[(usize, String)]) -> usize {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (_, id) in grants {
        *seen.entry(id).or_default() += 1;
    }
    seen.values().map(|c| c - 1).sum()
}

/// What one claimer did over all its slices.
type RaceOut = (Vec<(usize, String)>, Vec<f64>, usize, bool, f64);
/// One claimer: runs for the given seconds.
type Claimer<'a> = Box<dyn Fn(f64) -> RaceOut + Sync + 'a>;

/// Contention: every claimer runs in slices of about one second, claimers interleaved
/// (A B C .. then .. C B A), so a shared machine's load drifts over all of them alike.
#[allow(clippy::too_many_lines)] // six claimers, each set up and checked
fn contention(opts: &Opts, base: &Path) -> Vec<Contention> {
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
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let slices = secs.round().max(1.0) as usize;
    #[allow(clippy::cast_precision_loss)]
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
    let ws = Workspace::open(Some(&root)).expect("open root");
    let owner_of: HashMap<&str, usize> =
        all_grants.iter().map(|(w, id)| (id.as_str(), *w)).collect();
    let mut lost = 0;
    for i in 0..n {
        let id = task_id(i);
        let ok = match circe::task::load(&ws, &id) {
            Ok(Some(st)) => match owner_of.get(id.as_str()) {
                Some(w) => {
                    let me = format!("w{w}");
                    st.rec.owner.as_deref() == Some(me.as_str())
                        && st.location == Some(Mailbox::Inbox(me))
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
/// once, then calls `circe::task::claim_next` back to back for SECS (the same locks,
/// renames, records, board and event-log writes and fsyncs as `circe claim --next`, minus
/// the process start). Prints `ms task` per grant, `ms -` per lost race, `empty` when
/// the queue ran dry. Durability comes from CIRCE_DURABILITY, as for the CLI.
fn lib_worker(args: &[String]) {
    use std::io::Write as _;
    let [root, agent, secs] = args else { usage("--lib-worker ROOT AGENT SECS") };
    let secs: f64 = secs.parse().unwrap_or_else(|_| usage("bad SECS"));
    let ws = Workspace::open(Some(Path::new(root))).expect("open root");
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut out = String::new();
    while Instant::now() < deadline {
        let t = Instant::now();
        let r = circe::task::claim_next(&ws, agent, WORKER_ROLE, None);
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
fn lib_race(root: &Path, workers: usize, secs: f64, d: Durability) -> RaceOut {
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

fn report_contention(opts: &Opts, res: &[Contention], out: &mut String) {
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
        #[allow(clippy::cast_precision_loss)]
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
         {} processes each calling `circe::task::claim_next` in a loop: the same claim, without \
         starting a process per claim.",
        opts.contention_tasks, opts.workers
    );
}

// ---- memory --------------------------------------------------------------------------------

/// Peak RSS (KiB) of one run, via /usr/bin/time.
fn peak_kib(cmd: &mut Command) -> Option<u64> {
    let mut t = Command::new("/usr/bin/time");
    t.arg("-f").arg("%M").arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            t.env(k, v);
        }
    }
    let out = t.stdin(Stdio::null()).stdout(Stdio::null()).output().ok()?;
    String::from_utf8_lossy(&out.stderr).lines().last()?.trim().parse().ok()
}

fn memory(s: &Sized, out: &mut String) {
    let _ = writeln!(out, "\n## Peak memory at {} tasks (max RSS, /usr/bin/time %M)\n", s.n);
    if !Path::new("/usr/bin/time").exists() {
        let _ = writeln!(out, "skipped: /usr/bin/time is not installed (apt-get install time)");
        return;
    }
    let root = &s.root;
    let full = Durability::Full;
    let id = task_id(s.n / 2);
    let mut rows: Vec<(&str, Option<u64>)> = vec![
        (
            "circe send",
            peak_kib(circe(root, "coordinator", full).args([
                "send",
                "--to",
                TO,
                "--intent",
                "implement_feature",
                "--task",
                "MEM-1",
                "--summary",
                "x",
            ])),
        ),
        ("circe claim <id>", peak_kib(circe(root, "w0", full).args(["claim", &id]))),
        ("circe release", peak_kib(circe(root, "w0", full).args(["release", &id]))),
    ];
    let next = peak_kib(circe(root, "w1", full).args(["claim", "--next"]));
    rows.push(("circe claim --next", next));
    rows.push(("circe tasks", peak_kib(circe(root, "w0", full).arg("tasks"))));
    rows.push(("sqlite3 list", peak_kib(&mut sqlite(&s.db, "SELECT * FROM tasks"))));
    rows.push(("/bin/true", peak_kib(&mut Command::new("/bin/true"))));
    let _ = writeln!(out, "| command | peak RSS KiB |\n|---|---:|");
    for (name, kib) in rows {
        let _ = writeln!(out, "| {name} | {} |", kib.map_or("?".into(), |k| k.to_string()));
    }
}

// ---- targets -------------------------------------------------------------------------------

fn verdicts(opts: &Opts, samples: &Samples, cont: &[Contention], out: &mut String) {
    let _ = writeln!(out, "\n## Targets (durable = circe with fsync on)\n");
    let get = |op: usize, n: usize, v: &str| -> Option<&[f64]> {
        samples.get(&(op, n)).and_then(|m| m.get(v)).map(Vec::as_slice)
    };
    let line = |out: &mut String, what: &str, ratio: Option<f64>, limit: f64| {
        let _ = match ratio {
            Some(r) => writeln!(
                out,
                "- {what}: {:.2} (limit {limit}) -> {}",
                r,
                if r <= limit { "MET" } else { "MISSED" }
            ),
            None => writeln!(out, "- {what}: not measured (size not in --sizes)"),
        };
    };
    for &n in &opts.sizes {
        let r = get(1, n, "circe").zip(get(1, n, "sqlite claim")).map(|(a, b)| paired_ratio(a, b));
        line(out, &format!("claim <id> / sqlite3 claim at {n}"), r, 1.0);
    }
    let small = opts.sizes.first().copied().unwrap_or(0);
    let big = opts.sizes.last().copied().unwrap_or(0);
    let r = get(1, big, "circe").zip(get(1, small, "circe")).map(|(a, b)| paired_ratio(a, b));
    line(out, &format!("claim <id> at {big} / at {small}"), r, 1.2);
    let at = if opts.sizes.contains(&10_000) { 10_000 } else { big };
    let r = get(3, at, "circe").zip(get(3, at, "mv claim")).map(|(a, b)| paired_ratio(a, b));
    line(out, &format!("claim --next / mv claim at {at}"), r, 2.0);
    let r = get(4, at, "circe").zip(get(4, at, "sqlite list")).map(|(a, b)| paired_ratio(a, b));
    line(out, &format!("tasks / sqlite3 list at {at}"), r, 1.0);
    if let Some(c) = cont.first() {
        #[allow(clippy::cast_precision_loss)]
        let rate = c.claims as f64 / c.secs;
        let ok = rate >= 1000.0 && c.double == 0 && c.lost == 0;
        let _ = writeln!(
            out,
            "- {} workers, durable: {rate:.0} claims/s (target 1000), {} double grants, {} lost -> {}",
            opts.workers,
            c.double,
            c.lost,
            if ok { "MET" } else { "MISSED" }
        );
    }
}

// ---- main ----------------------------------------------------------------------------------

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
    let opts = parse_opts();
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
    let _ = writeln!(out, "circe binary: {}", circe_bin().display());

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
    verdicts(&opts, &samples, &cont, &mut out);
    let _ = writeln!(
        out,
        "\nwatch latency: not measured (circe has no `watch` command yet).\nend load: {}",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    println!("{out}");
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&opts.dir);
    }
}
