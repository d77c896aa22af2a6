//! Running processes (timed, with a cleared-down environment) and populating the roots
//! every operation and claimer works on.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{SQLITE, circe_bin};
use circe::config::Durability;
use circe::engine::RootSpec;
use circe::message::{Format, Message};
use circe::names::AgentName;
use circe::workspace::Workspace;

/// Wall time of one process in ms, its exit status and its stdout (when `capture`).
pub(crate) fn timed(cmd: &mut Command, capture: bool) -> (f64, bool, String) {
    cmd.stdin(Stdio::null()).stderr(Stdio::null());
    cmd.stdout(if capture { Stdio::piped() } else { Stdio::null() });
    let start = Instant::now();
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    (ms, out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(crate) fn circe(root: &Path, agent: &str, durability: Durability) -> Command {
    circe_env(Command::new(circe_bin()), root, agent, durability)
}

pub(crate) fn circe_env(
    mut c: Command,
    root: &Path,
    agent: &str,
    durability: Durability,
) -> Command {
    c.env("CIRCE_ROOT", root).env("CIRCE_AGENT", agent).env(
        "CIRCE_DURABILITY",
        match durability {
            Durability::Full => "full",
            Durability::Relaxed => "relaxed",
        },
    );
    c
}

pub(crate) fn must(cmd: &mut Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn sqlite(db: &Path, sql: &str) -> Command {
    let mut c = Command::new(SQLITE);
    c.arg("-cmd").arg(".timeout 10000").arg(db).arg(sql);
    c
}

/// The task id field of `circe claim --json` output.
pub(crate) fn claimed_task(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("task_id").and_then(|t| t.as_str()).map(str::to_string)
}

// ---- populating --------------------------------------------------------------------------

pub(crate) fn task_id(i: usize) -> String {
    format!("T{i:06}")
}

pub(crate) const WORKER_ROLE: &str = "engineer";
/// Tasks go to `all`: the root also has an agent named `engineer`, and a task addressed
/// to an agent name is for that agent only.
pub(crate) const TO: &str = "all";

/// A circe root under `dir` with agents w0..w(workers-1) and `n` waiting tasks, made
/// through the library with relaxed durability (populating is not measured).
pub(crate) fn populate_circe(dir: &Path, n: usize, workers: usize) -> PathBuf {
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
    let ws = Workspace::open_with(&RootSpec::Path(root.clone()), Durability::Relaxed)
        .expect("open root");
    let coordinator = AgentName::new("coordinator").expect("a name");
    for i in 0..n {
        let mut m = Message::new(Format::Circe);
        m.to = Some(TO.into());
        m.intent = Some("implement_feature".into());
        m.task_id = Some(task_id(i));
        m.body = format!("## Summary\nbenchmark task {i}\n");
        circe::ops::send(&ws, &coordinator, m).expect("populate send");
    }
    root
}

/// The naive shell layout: NEW_MESSAGES with `n` files and one INBOX per worker.
pub(crate) fn populate_mv(dir: &Path, n: usize, workers: usize) -> Vec<String> {
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
pub(crate) fn populate_sqlite(db: &Path, n: usize) {
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
