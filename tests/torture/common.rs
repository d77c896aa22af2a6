//! The harness: temp roots, running the real `circe` binary, worker processes, and the
//! checkers every torture test shares.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use circe::task::lifecycle::Status;
use circe::task::record::{OwnerRecord, StatusRecord};

/// `circe send` arguments that open task `id` for any engineer (as the coordinator).
pub fn open_args(id: &str) -> [&str; 9] {
    ["send", "--to", "all", "--intent", "implement_feature", "--task", id, "--summary", "x"]
}

/// The circe binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_circe");

/// `CIRCE_TORTURE_SCALE`: 1 (default) for the fast slice; the `#[ignore]`d long tests set
/// their own sizes and multiply them by this.
pub fn scale() -> f64 {
    std::env::var("CIRCE_TORTURE_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}

pub fn scaled(n: usize) -> usize {
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let v = (n as f64 * scale()).round() as usize;
    v.max(1)
}

/// Result of one `circe` run.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    fn from(o: &Output) -> Out {
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// A temp root: `<tmp>/.circe`, made with `circe init`, plus engineers `e1..eN`.
pub struct Root {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

impl Root {
    pub fn new(engineers: usize) -> Root {
        Root::new_in(&std::env::temp_dir(), engineers)
    }

    pub fn new_in(parent: &Path, engineers: usize) -> Root {
        let tmp = tempfile::Builder::new().prefix("circe-torture-").tempdir_in(parent).unwrap();
        let dir = tmp.path().join(".circe");
        let r = Root { tmp, dir };
        r.ok(None, &["init", r.tmp.path().to_str().unwrap()]);
        for i in 1..=engineers {
            r.ok(None, &["agent", "add", &format!("e{i}"), "--role", "engineer"]);
        }
        r
    }

    /// A root kept in a fresh schema of this test binary's throwaway PostgreSQL cluster
    /// (`tests/support/pg_cluster.rs`), named by a folder that points at it (`circe init
    /// --engine URL`: every command and worker given `dir` opens the database), plus
    /// engineers `e1..eN`. `None`, said on stderr, when PostgreSQL cannot run here.
    pub fn on_postgres(engineers: usize) -> Option<Root> {
        let url = match crate::pg_cluster::cluster() {
            Ok(c) => c.fresh_url(),
            Err(why) => {
                eprintln!("skipped: {why}");
                return None;
            }
        };
        let tmp = tempfile::Builder::new().prefix("circe-torture-").tempdir().unwrap();
        let dir = tmp.path().join(".circe");
        let r = Root { tmp, dir };
        r.ok(None, &["init", "--engine", &url, r.tmp.path().to_str().unwrap()]);
        for i in 1..=engineers {
            r.ok(None, &["agent", "add", &format!("e{i}"), "--role", "engineer"]);
        }
        Some(r)
    }

    /// The root's workspace, opened in this process (for the checkers: either engine).
    pub fn workspace(&self) -> circe::workspace::Workspace {
        let spec = circe::engine::RootSpec::Path(self.dir.clone());
        circe::workspace::Workspace::open(&spec).expect("open the root")
    }

    /// An existing root (a copy of another).
    pub fn at(dir: PathBuf) -> Root {
        Root { tmp: tempfile::tempdir().unwrap(), dir }
    }

    /// A command for the binary with a cleared environment and this root.
    pub fn cmd(&self, agent: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CIRCE_ROOT", &self.dir)
            .env("CIRCE_DURABILITY", "relaxed");
        if let Some(a) = agent {
            c.env("CIRCE_AGENT", a);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.args(args).stdin(Stdio::null());
        c
    }

    pub fn run_env(&self, agent: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Out {
        let o = self.cmd(agent, args, env).output().unwrap();
        Out::from(&o)
    }

    pub fn run(&self, agent: Option<&str>, args: &[&str]) -> Out {
        self.run_env(agent, args, &[])
    }

    /// Run and insist on exit 0.
    pub fn ok(&self, agent: Option<&str>, args: &[&str]) -> Out {
        let o = self.run(agent, args);
        assert_eq!(o.code, 0, "circe {args:?} as {agent:?} failed: {o:?}");
        o
    }

    /// Open task `id` for any engineer.
    pub fn open(&self, id: &str) {
        self.ok(Some("coordinator"), &open_args(id));
    }

    /// Message files by name -> the boxes holding a file of that name.
    pub fn messages(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut boxes = vec![("new".to_string(), self.dir.join("NEW_MESSAGES"))];
        boxes.push(("logs".into(), self.dir.join("LOGS")));
        if let Ok(rd) = std::fs::read_dir(self.dir.join("AGENTS")) {
            for e in rd.flatten() {
                let a = e.file_name().to_string_lossy().into_owned();
                boxes.push((format!("inbox:{a}"), e.path().join("INBOX")));
                boxes.push((format!("workspace:{a}"), e.path().join("WORKSPACE")));
            }
        }
        for (label, dir) in boxes {
            let Ok(rd) = std::fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if Path::new(&n).extension().is_some_and(|x| x == "md") && !n.starts_with('.') {
                    out.entry(n).or_default().push(label.clone());
                }
            }
        }
        out
    }

    /// `.status` of a task; `None` when absent or not a regular file (planted links/FIFOs).
    pub fn status(&self, task: &str) -> Option<StatusRecord> {
        let p = self.dir.join("TASKS").join(format!("{task}.status"));
        if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
            return None;
        }
        let t = std::fs::read_to_string(p).ok()?;
        Some(StatusRecord::parse(task, &t).unwrap())
    }

    pub fn tasks(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir.join("TASKS"))
            .unwrap()
            .flatten()
            .filter_map(|e| {
                e.file_name().to_string_lossy().strip_suffix(".status").map(str::to_string)
            })
            .collect();
        v.sort();
        v
    }

    /// `circe doctor [--repair] --json`: exit code and the violations' texts.
    pub fn doctor(&self, repair: bool) -> (i32, Vec<String>) {
        self.doctor_env(repair, &[])
    }

    /// `doctor`, with `env` set (a test-only broken variant, say).
    pub fn doctor_env(&self, repair: bool, env: &[(&str, &str)]) -> (i32, Vec<String>) {
        let mut args = vec!["--json", "doctor"];
        if repair {
            args.push("--repair");
        }
        let o = self.run_env(None, &args, env);
        let v: serde_json::Value = serde_json::from_str(&o.stdout)
            .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {o:?}"));
        let list = find_violations(&v);
        (o.code, list)
    }

    /// The task-level checker: every task's message lies in exactly one box, and that box,
    /// `.status` and `.owner` agree. Returns the problems (empty = consistent).
    pub fn task_problems(&self) -> Vec<String> {
        let msgs = self.messages();
        let mut p = Vec::new();
        for t in self.tasks() {
            let Some(rec) = self.status(&t) else { continue };
            let op = self.dir.join("TASKS").join(format!("{t}.owner"));
            let owner = std::fs::symlink_metadata(&op)
                .is_ok_and(|m| m.is_file())
                .then(|| std::fs::read_to_string(&op).ok())
                .flatten()
                .map(|s| OwnerRecord::parse(&s));
            let boxes = msgs.get(&rec.message).cloned().unwrap_or_default();
            if boxes.len() != 1 && !rec.status.is_terminal() {
                p.push(format!(
                    "task {t}: message {} in {} boxes {boxes:?}",
                    rec.message,
                    boxes.len()
                ));
                continue;
            }
            let b = boxes.first().cloned().unwrap_or_default();
            match rec.status {
                Status::New | Status::Parked => {
                    if b != "new" {
                        p.push(format!("task {t} is {:?} but its message is in {b}", rec.status));
                    }
                    if owner.is_some() {
                        p.push(format!("task {t} is {:?} but has a .owner", rec.status));
                    }
                }
                s if s.is_owned() => {
                    let o = rec.owner.as_ref().map(ToString::to_string).unwrap_or_default();
                    if b != format!("inbox:{o}") && b != format!("workspace:{o}") {
                        p.push(format!("task {t} is held by {o} but its message is in {b}"));
                    }
                    match owner {
                        Some(Some(or)) if or.owner.as_str() == o && or.epoch == rec.epoch => {}
                        other => p.push(format!(
                            "task {t}: .owner {other:?} does not match owner {o} epoch {}",
                            rec.epoch
                        )),
                    }
                }
                _ => {}
            }
        }
        p
    }

    /// Full check: task consistency, every task message exactly once, doctor clean.
    pub fn assert_clean(&self, ctx: &str) {
        let p = self.task_problems();
        assert!(p.is_empty(), "{ctx}: task problems: {p:#?}");
        let (code, v) = self.doctor(false);
        assert!(code == 0 && v.is_empty(), "{ctx}: doctor found {v:#?}");
    }
}

fn find_violations(v: &serde_json::Value) -> Vec<String> {
    let arr = v
        .get("violations")
        .or_else(|| v.get("data").and_then(|d| d.get("violations")))
        .and_then(|a| a.as_array());
    arr.map(|a| {
        a.iter()
            .map(|x| {
                format!(
                    "[{}] {}",
                    x.get("invariant").map(ToString::to_string).unwrap_or_default(),
                    x.get("what").and_then(|w| w.as_str()).unwrap_or_default()
                )
            })
            .collect()
    })
    .unwrap_or_default()
}

/// Names that appear in more than one box (or not at all, from `expected`).
pub fn lost_or_duplicated(
    before: &BTreeMap<String, Vec<String>>,
    after: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let mut p = Vec::new();
    for (n, b) in before {
        let now = after.get(n).map_or(0, Vec::len);
        if now == 0 {
            p.push(format!("lost {n} (was in {b:?})"));
        } else if now > b.len() {
            p.push(format!("duplicated {n}: {:?}", after[n]));
        }
    }
    p
}

// ---- worker processes ---------------------------------------------------------------------

/// Start this test binary again as a worker (see `worker_entry` in main.rs).
pub fn spawn_worker(kind: &str, args: &[String], root: &Path, env: &[(&str, &str)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["worker_entry", "--exact", "--nocapture", "--test-threads=1", "--include-ignored"])
        .env("CIRCE_TORTURE_WORKER", kind)
        .env("CIRCE_TORTURE_ARGS", args.join("\u{1f}"))
        .env("CIRCE_ROOT", root)
        .env("CIRCE_DURABILITY", "relaxed")
        .env_remove("CIRCE_NOW")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

/// Kill one of `kids` at random every `pause_ms` + up to `spread_ms` ms and start it again
/// (`spawn(slot, kills so far)`), `kills` times or until `limit` from `start`; then wait
/// for every worker to end by itself (within a minute past `limit`). Returns the kills made.
pub fn kill_storm(
    kids: &mut [Child],
    spawn: &dyn Fn(usize, usize) -> Child,
    (kills, start, limit): (usize, Instant, Duration),
    (pause_ms, spread_ms): (u64, u64),
    rng: &mut Rng,
) -> usize {
    let mut done = 0;
    while done < kills && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(pause_ms + rng.next() % spread_ms));
        let i = rng.below(kids.len());
        let _ = kids[i].kill();
        let _ = kids[i].wait();
        done += 1;
        kids[i] = spawn(i, done);
    }
    for k in kids.iter_mut() {
        while k.try_wait().unwrap().is_none() {
            assert!(start.elapsed() < limit + Duration::from_secs(60), "workers over time");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    done
}

pub fn wait_all(children: Vec<Child>, limit: Duration) {
    let start = Instant::now();
    for mut c in children {
        loop {
            if c.try_wait().unwrap().is_some() {
                break;
            }
            if start.elapsed() > limit {
                let _ = c.kill();
                let _ = c.wait();
                panic!("worker ran over the time limit {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Append one whole line (FS_RULES 7) to a worker's log.
pub fn log_line(path: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    f.write_all(format!("{line}\n").as_bytes()).unwrap();
}

/// A tiny deterministic PRNG (xorshift) so runs repeat from a seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n as u64)).unwrap()
    }
}

/// Run `f` as a worker when this process was started by `spawn_worker`.
pub fn worker_args() -> Vec<String> {
    std::env::var("CIRCE_TORTURE_ARGS")
        .unwrap_or_default()
        .split('\u{1f}')
        .map(str::to_string)
        .collect()
}

// ---- sequence numbers -------------------------------------------------------------------

/// One numbered thing a sender delivered: (sender, epoch, number, identity).
pub type Numbered = (String, u64, u64, String);

/// Every numbered message in the boxes (one per msg_id: a broadcast's copies share one) and
/// every numbered line of the chat channel.
pub fn numbered(r: &Root) -> Vec<Numbered> {
    let mut out = Vec::new();
    let mut seen_ids = std::collections::HashSet::new();
    let mut dirs = vec![r.dir.join("NEW_MESSAGES"), r.dir.join("LOGS")];
    if let Ok(rd) = std::fs::read_dir(r.dir.join("AGENTS")) {
        for e in rd.flatten() {
            dirs.push(e.path().join("INBOX"));
            dirs.push(e.path().join("WORKSPACE"));
        }
    }
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            if !e.file_name().to_string_lossy().ends_with(".md") {
                continue;
            }
            let Ok(bytes) = std::fs::read(e.path()) else { continue };
            let Ok(m) = circe::message::parse_bytes(&bytes, circe::message::Mode::Draft) else {
                continue;
            };
            let (Some(from), Some(n)) = (m.from_agent(), m.seq) else { continue };
            let id = m.msg_id.clone().unwrap_or_else(|| e.path().display().to_string());
            if seen_ids.insert(id.clone()) {
                out.push((from.to_string(), m.seq_epoch.unwrap_or(0), n, id));
            }
        }
    }
    let chat = std::fs::read_to_string(r.dir.join("chat.md")).unwrap_or_default();
    for (i, line) in chat.lines().enumerate() {
        let Some(l) = circe::chat::parse_line(line, &|_| true) else { continue };
        let Some(s) = circe::seq::parse_line(&l.body) else { continue };
        if let (true, Some(n)) = (s.role_key() == l.sender.to_ascii_uppercase(), s.seq) {
            out.push((l.sender, s.epoch, n, format!("chat line {}", i + 1)));
        }
    }
    out
}

/// The numbering checker: per sender and epoch, the numbers delivered are exactly 1, 2, ...,
/// max: no number twice (two different messages), none missing.
pub fn numbering_problems(items: &[Numbered]) -> Vec<String> {
    let mut by: BTreeMap<(&str, u64), BTreeMap<u64, Vec<&str>>> = BTreeMap::new();
    for (s, e, n, id) in items {
        by.entry((s.as_str(), *e)).or_default().entry(*n).or_default().push(id.as_str());
    }
    let mut p = Vec::new();
    for ((s, e), nums) in &by {
        for (n, ids) in nums {
            if ids.len() > 1 {
                p.push(format!("{s} epoch {e}: #{n} given to {} messages {ids:?}", ids.len()));
            }
        }
        let max = nums.keys().next_back().copied().unwrap_or(0);
        let missing: Vec<u64> = (1..=max).filter(|n| !nums.contains_key(n)).collect();
        if !missing.is_empty() {
            p.push(format!("{s} epoch {e}: numbers missing (gaps) {missing:?} of 1..={max}"));
        }
    }
    p
}
