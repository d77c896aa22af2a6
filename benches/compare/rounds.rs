//! The per-invocation rounds: every operation at every size, circe and its baselines back
//! to back, and peak memory at the largest size.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::procs::{TO, circe, claimed_task, must, sqlite, task_id, timed};
use crate::stats::{Samples, median, paired_ratio, push};
use crate::{Opts, circe_bin};
use circe::config::Durability;

pub(crate) struct Sized {
    pub(crate) n: usize,
    pub(crate) root: PathBuf,
    pub(crate) mv: PathBuf,
    pub(crate) mv_names: Vec<String>,
    pub(crate) db: PathBuf,
}

pub(crate) const OPS: [&str; 6] =
    ["send (create)", "claim <id>", "release", "claim --next", "tasks (board)", "process floor"];

/// Which baseline each operation is compared with, by variant name.
pub(crate) fn baseline_of(op: usize) -> &'static str {
    match op {
        0 => "sqlite insert",
        1 | 3 => "sqlite claim",
        2 => "sqlite release",
        4 => "sqlite list",
        _ => "/bin/true",
    }
}

#[expect(clippy::too_many_lines)] // one round, every operation in order
pub(crate) fn round(r: usize, s: &Sized, samples: &mut Samples) {
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
        let (ms, ok, _) = timed(&mut send(&s.root, *d, &format!("S{r}-{k}")), false);
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

pub(crate) fn report_rounds(opts: &Opts, samples: &Samples, out: &mut String) {
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

// ---- memory --------------------------------------------------------------------------------

/// Peak RSS (KiB) of one run, via /usr/bin/time.
pub(crate) fn peak_kib(cmd: &mut Command) -> Option<u64> {
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

pub(crate) fn memory(s: &Sized, out: &mut String) {
    let _ = writeln!(out, "\n## Peak memory at {} tasks (max RSS, /usr/bin/time %M)\n", s.n);
    if !Path::new("/usr/bin/time").exists() {
        let _ = writeln!(out, "skipped: /usr/bin/time is not installed (apt-get install time)");
        return;
    }
    let root = &s.root;
    let full = Durability::Full;
    let id = task_id(s.n / 2);
    let mut rows: Vec<(&str, Option<u64>)> = vec![
        ("circe send", peak_kib(&mut send(root, full, "MEM-1"))),
        ("circe claim <id>", peak_kib(circe(root, "w0", full).args(["claim", &id]))),
        ("circe release", peak_kib(circe(root, "w0", full).args(["release", &id]))),
    ];
    let next = peak_kib(circe(root, "w1", full).args(["claim", "--next"]));
    rows.push(("circe claim --next", next));
    // The board is streamed: rows go to stdout as the engine hands them over.
    rows.push(("circe tasks", peak_kib(circe(root, "w0", full).arg("tasks"))));
    rows.push(("circe tasks --json", peak_kib(circe(root, "w0", full).args(["tasks", "--json"]))));
    rows.push((
        "circe inbox (counts the tasks it may take)",
        peak_kib(circe(root, "w0", full).arg("inbox")),
    ));
    rows.push(("sqlite3 list", peak_kib(&mut sqlite(&s.db, "SELECT * FROM tasks"))));
    rows.push(("/bin/true", peak_kib(&mut Command::new("/bin/true"))));
    let _ = writeln!(out, "| command | peak RSS KiB |\n|---|---:|");
    for (name, kib) in rows {
        let _ = writeln!(out, "| {name} | {} |", kib.map_or("?".into(), |k| k.to_string()));
    }
}

/// `circe send` of a new task, as the coordinator.
fn send(root: &Path, d: Durability, task: &str) -> Command {
    let mut c = circe(root, "coordinator", d);
    c.args([
        "send",
        "--to",
        TO,
        "--intent",
        "implement_feature",
        "--task",
        task,
        "--summary",
        "benchmark send",
    ]);
    c
}
