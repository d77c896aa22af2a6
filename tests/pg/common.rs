//! The PostgreSQL suite's harness: a root in a fresh schema, `circe` run as separate
//! processes against it (each a client of its own), and the checkers the scenarios share.

use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use circe::engine::{Engine, RootSpec};
use circe::event::{Cursor, Event, EventKind};
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_circe");

/// The cluster for this test binary, or the reason the test is skipped.
pub fn cluster() -> Option<&'static crate::pg_cluster::Cluster> {
    match crate::pg_cluster::cluster() {
        Ok(c) => Some(c),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// Skip the test (returning from it) when there is no PostgreSQL here.
macro_rules! need_pg {
    () => {
        match $crate::common::cluster() {
            Some(c) => c,
            None => return,
        }
    };
}

/// One run of circe.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn from(o: &Output) -> Out {
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub fn ok(&self) -> &Out {
        assert_eq!(self.code, 0, "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or(Value::Null)
    }
}

/// A root in a database, and how to run circe against it.
pub struct Root {
    pub url: String,
    /// Extra environment for every command (CIRCE_TEST_BREAK, ...).
    pub env: Vec<(String, String)>,
    /// What runs circe (`ip netns exec <host>` for a client in a network namespace).
    pub prefix: Vec<String>,
}

impl Root {
    /// A new root (in a fresh schema) with engineers `e1..=eN`.
    pub fn new(url: &str, clock: &str, engineers: usize) -> Root {
        let r = Root::at(url);
        r.run(None, &["init", "--clock", clock]).ok();
        for i in 1..=engineers {
            r.run(None, &["agent", "add", &format!("e{i}"), "--role", "engineer"]).ok();
        }
        r
    }

    /// An existing root, seen from this host.
    pub fn at(url: &str) -> Root {
        Root { url: url.to_string(), env: Vec::new(), prefix: Vec::new() }
    }

    pub fn command(&self, agent: Option<&str>, args: &[&str]) -> Command {
        let mut c = match self.prefix.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CIRCE_ROOT", &self.url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(a) = agent {
            c.env("CIRCE_AGENT", a);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, agent: Option<&str>, args: &[&str]) -> Out {
        Out::from(&self.command(agent, args).output().expect("run circe"))
    }

    /// Open `n` tasks T-000.. for all engineers.
    pub fn open_tasks(&self, n: usize) {
        self.open_tasks_saying(n, |_| "x".to_string());
    }

    /// Open `n` tasks T-000.. for all engineers, each with the summary `summary(id)`.
    pub fn open_tasks_saying(&self, n: usize, summary: impl Fn(&str) -> String) {
        for i in 0..n {
            let id = format!("T-{i:03}");
            self.open_task(&id, &summary(&id));
        }
    }

    /// Open task `id` for all engineers.
    pub fn open_task(&self, id: &str, summary: &str) {
        let send = ["send", "--to", "all", "--intent", "implement_feature"];
        self.run(Some("coordinator"), &[&send[..], &["--task", id, "--summary", summary]].concat())
            .ok();
    }

    /// The engine, opened in this process (for the checkers).
    pub fn engine(&self) -> Box<dyn Engine> {
        circe::engine::open(&RootSpec::Url(self.url.clone())).expect("open the root").0
    }

    /// The whole event log.
    pub fn events(&self) -> Vec<Event> {
        let eng = self.engine();
        let mut all: Vec<Event> = Vec::new();
        loop {
            let after = all.last().map_or(Cursor::START, |e| Cursor::after(e.id));
            let more = eng.read_events(after, 10_000).expect("read events");
            if more.is_empty() {
                return all;
            }
            all.extend(more);
        }
    }
}

/// A claim a client saw succeed (exit 0): the grant it was told about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Grant {
    pub task: String,
    pub epoch: u64,
    pub agent: String,
}

impl Grant {
    pub fn from_json(agent: &str, v: &Value) -> Option<Grant> {
        Some(Grant {
            task: v["task_id"].as_str()?.to_string(),
            epoch: v["epoch"].as_u64()?,
            agent: agent.to_string(),
        })
    }
}

/// What the checkers found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub claims_logged: usize,
    pub acknowledged: usize,
    pub double_owners: Vec<String>,
    pub epoch_regressions: Vec<String>,
    pub missing_grants: Vec<String>,
    pub unacknowledged: usize,
}

/// Check the event log against the grants clients acknowledged: no two grants of one task
/// at one epoch (acknowledged or logged), epochs strictly increasing per task, every
/// acknowledged grant logged; counts the logged claims nobody acknowledged.
pub fn check_grants(events: &[Event], acked: &[Grant]) -> Verdict {
    let mut v = Verdict { acknowledged: acked.len(), ..Verdict::default() };
    let mut logged: HashMap<(String, u64), Vec<String>> = HashMap::new();
    let mut last_epoch: BTreeMap<String, u64> = BTreeMap::new();
    for e in events {
        let Some(task) = e.task.as_ref().map(ToString::to_string) else { continue };
        let Some(epoch) = e.epoch else { continue };
        if e.event == EventKind::Claim {
            v.claims_logged += 1;
            logged.entry((task.clone(), epoch)).or_default().push(e.agent.clone());
            if let Some(prev) = last_epoch.get(&task)
                && epoch <= *prev
            {
                v.epoch_regressions.push(format!(
                    "{task}: claim at epoch {epoch} after epoch {prev} (event {})",
                    e.id
                ));
            }
        }
        let prev = last_epoch.entry(task.clone()).or_insert(0);
        if epoch < *prev {
            v.epoch_regressions
                .push(format!("{task}: epoch {epoch} after {prev} (event {})", e.id));
        }
        *prev = (*prev).max(epoch);
    }
    for ((task, epoch), agents) in &logged {
        if agents.len() > 1 {
            v.double_owners.push(format!("{task} epoch {epoch}: logged for {agents:?}"));
        }
    }
    let mut by_grant: HashMap<(String, u64), Vec<String>> = HashMap::new();
    for g in acked {
        by_grant.entry((g.task.clone(), g.epoch)).or_default().push(g.agent.clone());
        let ok = logged.get(&(g.task.clone(), g.epoch)).is_some_and(|a| a.contains(&g.agent));
        if !ok {
            v.missing_grants.push(format!("{g:?}"));
        }
    }
    for ((task, epoch), agents) in &by_grant {
        let mut a = agents.clone();
        a.sort();
        a.dedup();
        if a.len() > 1 {
            v.double_owners.push(format!("{task} epoch {epoch}: acknowledged to {a:?}"));
        }
    }
    let acked_keys: std::collections::HashSet<(String, u64, String)> =
        acked.iter().map(|g| (g.task.clone(), g.epoch, g.agent.clone())).collect();
    for ((task, epoch), agents) in &logged {
        for a in agents {
            if !acked_keys.contains(&(task.clone(), *epoch, a.clone())) {
                v.unacknowledged += 1;
            }
        }
    }
    v.double_owners.sort();
    v
}

/// A cheap random number (xorshift), seeded per thread.
pub fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// `circe mirror TARGET --watch --interval 30s --rounds 2` on `root`, once it wrote its first
/// round (its circe.yaml there, or 10 s passed): its second round follows the next event.
pub fn mirror_second_round(root: &Root, target: &std::path::Path) -> std::process::Child {
    let args =
        ["mirror", target.to_str().unwrap(), "--watch", "--interval", "30s", "--rounds", "2"];
    let watch = root.command(None, &args).spawn().unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !target.join("circe.yaml").exists() && std::time::Instant::now() < until {
        nap(50);
    }
    watch
}

/// A short pause.
pub fn nap(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// `circe ARGS` in `dir` with an empty environment (no CIRCE_ROOT: the folder names the root).
pub fn run_in(dir: &std::path::Path, args: &[&str]) -> Out {
    Out::from(
        &Command::new(BIN).args(args).current_dir(dir).env_clear().output().expect("run circe"),
    )
}
