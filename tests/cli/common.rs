//! The harness: a fresh temp project per test, a cleared environment, the circe binary,
//! and the redactions every snapshot goes through.
//!
//! `CIRCE_TEST_ENGINE=postgres` runs the same tests against a root in a database: each
//! test's `Env::new()` makes its root in a fresh schema of a throwaway cluster (started once
//! per test binary, `--clock client` so the pinned clock decides leases), the project's
//! `.circe/circe.yaml` names it, and every read of the root's files goes through `circe
//! mirror` (which writes the local layout). Tests that plant or remove files in a root
//! folder are local-only (`local_only!`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use circe::task::StatusRecord;
use serde_json::Value;

/// The clock every test starts at (the fixtures' start, too).
pub const T0: &str = "2025-11-21T17:00:00Z";

/// The circe binary under test: the one cargo built, or `CIRCE_TEST_BIN` (to show a test
/// failing on another build, e.g. an older commit's binary).
pub fn exe() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var_os("CIRCE_TEST_BIN")
            .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_circe")), PathBuf::from)
    })
}

/// One test's project folder (a temp dir) and the pinned clock.
pub struct Env {
    dir: tempfile::TempDir,
    pub now: String,
    /// The database root, when the tests run against postgres.
    pub url: Option<String>,
}

/// Do the tests run against a root in a database (`CIRCE_TEST_ENGINE=postgres`)?
pub fn pg_mode() -> bool {
    match std::env::var("CIRCE_TEST_ENGINE").as_deref() {
        Ok("postgres") => true,
        Ok("local" | "") | Err(_) => false,
        Ok(other) => panic!("CIRCE_TEST_ENGINE={other}: expected local or postgres"),
    }
}

/// The cluster the postgres runs use (a failure to start one fails the test: it was asked for).
pub fn pg_url() -> String {
    match crate::pg_cluster::cluster() {
        Ok(c) => c.fresh_url(),
        Err(why) => panic!("CIRCE_TEST_ENGINE=postgres, but no cluster: {why}"),
    }
}

/// Skip the rest of a test when it runs against postgres, saying why.
macro_rules! local_only {
    ($why:expr) => {
        if $crate::common::pg_mode() {
            eprintln!("skipped against postgres: {}", $why);
            return;
        }
    };
}

/// What one run of circe printed, and its exit code.
#[derive(Debug)]
pub struct Out {
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Panics with everything printed unless the exit code is `code`.
    #[track_caller]
    pub fn code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            code,
            "exit code of `circe {}`\n{}",
            self.args.join(" "),
            self.show()
        );
        self
    }

    #[track_caller]
    pub fn ok(&self) -> &Self {
        self.code(0)
    }

    /// stdout parsed as one JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", self.show()))
    }

    /// Exit code, stdout and stderr together, as snapshots show them.
    pub fn show(&self) -> String {
        format!(
            "$ circe {}\nexit: {}\n----- stdout -----\n{}----- stderr -----\n{}",
            self.args.join(" "),
            self.code,
            self.stdout,
            self.stderr
        )
    }
}

/// What a snapshot shows: one run, several runs, or text.
pub trait Shown {
    fn shown(&self) -> String;
}

impl Shown for Out {
    fn shown(&self) -> String {
        self.show()
    }
}

impl Shown for [Out] {
    fn shown(&self) -> String {
        self.iter().map(Out::show).collect::<Vec<_>>().join("\n")
    }
}

impl Shown for Vec<Out> {
    fn shown(&self) -> String {
        self.as_slice().shown()
    }
}

impl Shown for String {
    fn shown(&self) -> String {
        self.clone()
    }
}

/// A command being built: `env.circe(["claim", "T-1"]).agent("engineer").run()`.
pub struct Run<'a> {
    env: &'a Env,
    args: Vec<std::ffi::OsString>,
    agent: Option<String>,
    now: Option<String>,
    cwd: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
    vars: Vec<(String, String)>,
}

impl Run<'_> {
    #[must_use]
    pub fn agent(mut self, a: &str) -> Self {
        self.agent = Some(a.to_string());
        self
    }

    #[must_use]
    pub fn now(mut self, t: &str) -> Self {
        self.now = Some(t.to_string());
        self
    }

    #[must_use]
    pub fn cwd(mut self, p: impl Into<PathBuf>) -> Self {
        self.cwd = Some(p.into());
        self
    }

    #[must_use]
    pub fn stdin(mut self, bytes: &[u8]) -> Self {
        self.stdin = Some(bytes.to_vec());
        self
    }

    #[must_use]
    pub fn var(mut self, k: &str, v: &str) -> Self {
        self.vars.push((k.to_string(), v.to_string()));
        self
    }

    pub fn run(self) -> Out {
        let mut cmd = Command::new(exe());
        cmd.args(&self.args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.env.path())
            .env("CIRCE_NOW", self.now.as_deref().unwrap_or(&self.env.now))
            .current_dir(self.cwd.as_deref().unwrap_or(self.env.path()))
            .stdin(if self.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(a) = &self.agent {
            cmd.env("CIRCE_AGENT", a);
        }
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("cannot run the circe binary");
        if let Some(bytes) = &self.stdin {
            let mut si = child.stdin.take().expect("stdin");
            si.write_all(bytes).expect("write stdin");
        }
        let out = child.wait_with_output().expect("wait for circe");
        let mut args: Vec<String> =
            self.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        if let Some(a) = &self.agent {
            args.insert(0, format!("--agent {a}"));
        }
        Out {
            args,
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Env {
    /// A project folder with `circe init` already run (against a database root in a fresh
    /// schema under `CIRCE_TEST_ENGINE=postgres`).
    pub fn new() -> Env {
        let mut env = Env::bare();
        if pg_mode() {
            let url = pg_url();
            env.circe(["init", "--engine", &url, "--clock", "client"]).run().ok();
            env.url = Some(url);
        } else {
            env.circe(["init"]).run().ok();
        }
        env
    }

    /// A project folder with a local root whatever the engine under test (for tests that
    /// write into the root's files themselves).
    pub fn local() -> Env {
        let env = Env::bare();
        env.circe(["init"]).run().ok();
        env
    }

    /// An empty project folder (no root).
    pub fn bare() -> Env {
        Env {
            dir: tempfile::Builder::new().prefix("circe-test-").tempdir().unwrap(),
            now: T0.into(),
            url: None,
        }
    }

    /// The project folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The `.circe` folder of the project (for a database root: the one naming it).
    pub fn dot_circe(&self) -> PathBuf {
        self.path().join(".circe")
    }

    /// The root's files: the `.circe` root, or a fresh `circe mirror` of a database root.
    pub fn root(&self) -> PathBuf {
        if self.url.is_none() {
            return self.dot_circe();
        }
        let dir = self.path().join("mirror");
        self.circe(["mirror", dir.to_str().unwrap()]).run().ok();
        dir
    }

    /// Replace the root's configuration (`circe config --set -`).
    pub fn set_config(&self, text: &str) {
        self.circe(["config", "--set", "-"]).stdin(text.as_bytes()).run().ok();
    }

    pub fn circe<I, S>(&self, args: I) -> Run<'_>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString>,
    {
        Run {
            env: self,
            args: args.into_iter().map(Into::into).collect(),
            agent: None,
            now: None,
            cwd: None,
            stdin: None,
            vars: Vec::new(),
        }
    }

    /// `circe ARGS` as `agent` at the env's clock.
    pub fn as_(&self, agent: &str, args: &[&str]) -> Out {
        self.circe(args).agent(agent).run()
    }

    /// `circe ARGS` as `agent` at time `now`.
    pub fn at(&self, now: &str, agent: &str, args: &[&str]) -> Out {
        self.circe(args).agent(agent).now(now).run()
    }

    /// Open task `task` for any engineer (coordinator sends implement_feature to all).
    pub fn open_task(&self, task: &str) -> Out {
        let o = self.as_(
            "coordinator",
            &[
                "send",
                "--to",
                "all",
                "--intent",
                "implement_feature",
                "--task",
                task,
                "--summary",
                "do it",
            ],
        );
        o.ok();
        o
    }

    /// Open task `task` and take it through to `completed` as the engineer (claim, start,
    /// its `tests_passed` check, complete).
    pub fn complete_task(&self, task: &str) {
        self.open_task(task);
        self.as_("engineer", &["claim", task]).ok();
        self.as_("engineer", &["status", task, "in_progress"]).ok();
        self.as_("engineer", &["check", task, "tests_passed=true"]).ok();
        self.as_("engineer", &["status", task, "completed"]).ok();
    }

    /// Open task `task` addressed `to`, with a deadline, as the coordinator.
    pub fn open_task_due(&self, task: &str, to: &str, deadline: &str) -> Out {
        let summary = format!("due {deadline}");
        let o = self.as_(
            "coordinator",
            &[
                "send",
                "--to",
                to,
                "--intent",
                "implement_feature",
                "--task",
                task,
                "--summary",
                &summary,
                "--deadline",
                deadline,
            ],
        );
        o.ok();
        o
    }

    /// Move the folder `.circe/REL` out of the root and put a link to it in its place (a
    /// box or an agent's folder someone linked elsewhere). Returns where it went.
    pub fn link_away(&self, rel: &str) -> PathBuf {
        let away = self.path().join(format!("{}-away", rel.replace('/', "-")));
        std::fs::rename(self.root().join(rel), &away).expect("move the folder away");
        std::os::unix::fs::symlink(&away, self.root().join(rel)).expect("link it back");
        away
    }

    /// Undo `link_away`: the folder itself back in place of the link.
    pub fn put_back(&self, rel: &str, away: &Path) {
        std::fs::remove_file(self.root().join(rel)).expect("remove the link");
        std::fs::rename(away, self.root().join(rel)).expect("put the folder back");
    }

    /// Read a file under `.circe`.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel))
            .unwrap_or_else(|e| panic!("cannot read .circe/{rel}: {e}"))
    }

    /// Message file names (`*.md`) in a box folder under `.circe`, sorted.
    pub fn ls(&self, rel: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.root().join(rel))
            .unwrap_or_else(|e| panic!("cannot list .circe/{rel}: {e}"))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| Path::new(n).extension().is_some_and(|e| e == "md"))
            .collect();
        v.sort();
        v
    }

    /// Every entry of a folder of the root (`ls` keeps message files only), sorted.
    pub fn ls_all(&self, rel: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.root().join(rel))
            .unwrap_or_else(|e| panic!("cannot list .circe/{rel}: {e}"))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A task's `.status` record, parsed by circe's own reader.
    pub fn record(&self, task: &str) -> StatusRecord {
        StatusRecord::parse(task, &self.read(&format!("TASKS/{task}.status")))
            .unwrap_or_else(|e| panic!("TASKS/{task}.status: {e}"))
    }

    /// The event log, one JSON object per line, each checked for duplicate keys (which
    /// JSON readers silently collapse).
    pub fn events(&self) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.root().join("LOGS/events.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let keys = top_level_keys(l);
                let mut unique = keys.clone();
                unique.sort();
                unique.dedup();
                assert_eq!(keys.len(), unique.len(), "duplicate keys in event line {l}");
                serde_json::from_str(l).expect("event line is JSON")
            })
            .collect()
    }

    /// Every path under `.circe` with its content (folders as `/`), locks, queue and tmp
    /// left out: what a refused command must leave exactly as it was.
    pub fn state(&self) -> BTreeMap<String, String> {
        tree(&self.root(), &["locks", "queue", "tmp", ".circe-mirror"])
    }

    /// The redactions for this env's snapshots.
    pub fn filters(&self) -> Vec<(String, String)> {
        let mut f = Vec::new();
        let raw = self.path().display().to_string();
        if let Ok(canon) = self.path().canonicalize() {
            let c = canon.display().to_string();
            if c != raw {
                f.push((regex_escape(&c), "[PROJECT]".into()));
            }
        }
        f.push((regex_escape(&raw), "[PROJECT]".into()));
        f.extend(common_filters());
        f
    }
}

/// The keys of a JSON object in the order written, duplicates kept.
pub fn top_level_keys(json: &str) -> Vec<String> {
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Vec<String>, A::Error> {
            let mut keys = Vec::new();
            while let Some((k, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                keys.push(k);
            }
            Ok(keys)
        }
    }
    let mut de = serde_json::Deserializer::from_str(json);
    serde::Deserializer::deserialize_map(&mut de, Keys).expect("a JSON object")
}

/// Redactions every snapshot needs whatever its temp dir: ids, hosts, pids, durations.
pub fn common_filters() -> Vec<(String, String)> {
    vec![
        (regex_escape(env!("CARGO_MANIFEST_DIR")), "[REPO]".into()),
        (r"\d{8}T\d{9}Z-[0-9a-z]{8}".into(), "[MSG_ID]".into()),
        (r"(host: ).+".into(), "${1}[HOST]".into()),
        (r#"("host": )"[^"]*""#.into(), r#"${1}"[HOST]""#.into()),
        (r"(pid: )\d+".into(), "${1}[PID]".into()),
        (r#"("pid": )\d+"#.into(), "${1}[PID]".into()),
        (r"\d+\.\d+s\)".into(), "[SECS])".into()),
        (r#"("seconds": ?)[0-9.e-]+"#.into(), "${1}[SECS]".into()),
        (r"/tmp/circe-test-[0-9A-Za-z]+".into(), "[PROJECT]".into()),
        // A root in a database reads as the local root it stands for.
        (r"postgres://\S*schema=[0-9A-Za-z_]+".into(), "[PROJECT]/.circe".into()),
        (r"\.tmp-\d+-[0-9a-z]{8}".into(), ".tmp-[PID]-[RAND]".into()),
    ]
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Every path under `dir` (relative, sorted) with its content; `skip` top-level names.
pub fn tree(dir: &Path, skip: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(dir, dir, skip, &mut out);
    out
}

fn walk(base: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<String, String>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd {
        let e = e.unwrap();
        let p = e.path();
        let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
        if dir == base && skip.contains(&rel.as_str()) {
            continue;
        }
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            out.insert(format!("{rel}/"), String::new());
            walk(base, &p, skip, out);
        } else if ty.is_symlink() {
            out.insert(rel, format!("-> {}", std::fs::read_link(&p).unwrap().display()));
        } else if ty.is_file() {
            out.insert(rel, String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned());
        } else {
            out.insert(rel, "(special file)".into());
        }
    }
}

/// Assert that `after` equals `before`, naming what differs.
#[track_caller]
pub fn assert_unchanged(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) {
    let mut diff = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => diff.push(format!("removed {k}")),
            Some(w) if w != v => diff.push(format!("changed {k}")),
            _ => {}
        }
    }
    for k in after.keys().filter(|k| !before.contains_key(*k)) {
        diff.push(format!("added {k}"));
    }
    assert!(diff.is_empty(), "the root changed:\n{}", diff.join("\n"));
}

/// Snapshot an `Out` (exit code, stdout and stderr together) with the env's redactions.
macro_rules! snap {
    ($env:expr, $out:expr) => {{
        let filters = $env.filters();
        let mut settings = insta::Settings::clone_current();
        for (re, with) in &filters {
            settings.add_filter(re, with.as_str());
        }
        settings.bind(|| insta::assert_snapshot!($crate::common::Shown::shown(&$out)));
    }};
    ($env:expr, $name:expr, $out:expr) => {{
        let filters = $env.filters();
        let mut settings = insta::Settings::clone_current();
        for (re, with) in &filters {
            settings.add_filter(re, with.as_str());
        }
        settings.bind(|| insta::assert_snapshot!($name, $crate::common::Shown::shown(&$out)));
    }};
}
