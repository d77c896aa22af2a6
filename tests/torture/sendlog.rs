//! Senders SIGKILLed at random while qa's watcher hands each message on to a hook: a send
//! cut off between its delivery and its event leaves the event to the sender's next send,
//! which logs it before its own (PROTOCOLS.md section 6, step 6). Afterwards every delivered
//! message has exactly one `send` event, and the watcher judged none stale (no `skip` by qa,
//! every message in qa's INBOX handed to the hook), without doctor having run.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use circe::boxes::Mailbox;
use circe::engine::RootSpec;
use circe::event::{Cursor, Event, EventKind};
use circe::message::{Format, Message};
use circe::names::{AgentName, CursorName};
use circe::workspace::Workspace;

use crate::caught::until_caught;
use crate::common::{Rng, Root, scaled, spawn_worker};

/// Worker: `n` sends by `me` to qa, to the qa role or to `all`.
pub fn worker(args: &[String]) {
    let me = AgentName::new(&args[0]).unwrap();
    let sends: usize = args[1].parse().unwrap();
    let mut rng = Rng(args[2].parse::<u64>().unwrap() | 1);
    let root = std::path::PathBuf::from(std::env::var("CIRCE_ROOT").unwrap());
    let targets = ["qa", "role:qa", "all"];
    for i in 0..sends {
        let ws = Workspace::open(&RootSpec::Path(root.clone())).unwrap();
        let mut m = Message::new(Format::Circe);
        m.to = Some(targets[rng.below(targets.len())].into());
        m.intent = Some("inform".into());
        m.body = format!("## Summary\n{me} {i}\n");
        let _ = circe::ops::send(&ws, &me, m);
    }
}

/// Which engine keeps a run's root.
#[derive(Debug, Clone, Copy)]
pub enum Kept {
    Folder,
    Postgres,
}

impl Kept {
    /// Can this engine run here? Says why not on stderr (the test then checks nothing).
    fn here(self) -> bool {
        match self {
            Kept::Folder => true,
            Kept::Postgres => {
                crate::pg_cluster::cluster().map_err(|why| eprintln!("skipped: {why}")).is_ok()
            }
        }
    }

    /// A root of this engine with engineers `e1..eN`.
    fn root(self, engineers: usize) -> Root {
        match self {
            Kept::Folder => Root::new(engineers),
            Kept::Postgres => Root::on_postgres(engineers).expect("PostgreSQL runs here"),
        }
    }
}

/// Every message in the INBOXes, read through the engine: (box, msg id).
fn delivered(ws: &Workspace) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (agent, _) in ws.engine.agents().unwrap() {
        let inbox = Mailbox::Inbox(agent);
        for name in ws.engine.list_box(&inbox).unwrap() {
            let Ok(bytes) = ws.engine.read_message(&inbox, &name) else { continue };
            let Ok(m) = circe::message::parse_bytes(&bytes, circe::message::Mode::Draft) else {
                continue;
            };
            out.push((inbox.label(), m.msg_id.unwrap_or_default()));
        }
    }
    out
}

/// The whole event log, read through the engine.
fn events(ws: &Workspace) -> Vec<Event> {
    let mut all: Vec<Event> = Vec::new();
    loop {
        let after = all.last().map_or(Cursor::START, |e| Cursor::after(e.id));
        let more = ws.engine.read_events(after, 10_000).unwrap();
        if more.is_empty() {
            return all;
        }
        all.extend(more);
    }
}

/// `agents` senders (e1..eN) on a root `kept` by either engine, `sends` each, `kills`
/// SIGKILLs spread over the run; returns (kills, messages delivered, problems).
pub fn run(
    kept: Kept,
    (agents, sends, kills): (usize, usize, usize),
    env: &[(&str, &str)],
    limit: Duration,
) -> (usize, usize, Vec<String>) {
    let r = kept.root(agents);
    let got = r.tmp.path().join("got");
    let hook = format!("echo \"$CIRCE_MSG_ID\" >> {}", got.display());
    let mut watcher = r
        .cmd(Some("qa"), &["watch", "--cursor", "q", "--kind", "send", "--exec", &hook], env)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The cursor is saved once the stream opens: from then on nothing is missed.
    let ws = r.workspace();
    let q = CursorName::new("q").unwrap();
    let start = Instant::now();
    while ws.engine.read_cursor(circe::engine::EVENTS_CURSORS, &q).unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "the watcher never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let spawn = |slot: usize, generation: usize| -> Child {
        let args = vec![
            format!("e{}", slot + 1),
            sends.to_string(),
            (slot * 7919 + generation + 1).to_string(),
        ];
        spawn_worker("sendlog", &args, &r.dir, env)
    };
    let mut kids: Vec<Child> = (0..agents).map(|s| spawn(s, 0)).collect();
    let done =
        crate::common::kill_storm(&mut kids, &spawn, (kills, start, limit), (3, 20), &mut rng);
    let senders_done = start.elapsed();
    // Each sender runs once more (no doctor): what a kill left is settled by it.
    let mut last = Vec::new();
    for i in 1..=agents {
        let o = r.run_env(
            Some(&format!("e{i}")),
            &["send", "--to", "qa", "--intent", "inform", "--summary", "last", "--json"],
            env,
        );
        assert_eq!(o.code, 0, "{o:?}");
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        last.push(v["msg_id"].as_str().unwrap().to_string());
    }
    // The watcher hands messages on in the log's order, once the hook of the one before
    // ended: it may be far behind the senders. Waited for while it moves on (at most 60 s
    // without a message handed on, 10 minutes in all).
    let (deadline, mut moved, mut count) = (Instant::now() + Duration::from_secs(600), None, 0);
    loop {
        let seen = std::fs::read_to_string(&got).unwrap_or_default();
        if last.iter().all(|id| seen.lines().any(|l| l == id)) || Instant::now() > deadline {
            break;
        }
        if moved.is_none() || seen.len() > count {
            (moved, count) = (Some(Instant::now()), seen.len());
        } else if moved.is_some_and(|t| t.elapsed() > Duration::from_secs(60)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "sendlog ({kept:?}): the senders ended after {senders_done:.1?}, the watcher was \
         stopped after {:.1?}",
        start.elapsed()
    );
    let _ = watcher.kill();
    let _ = watcher.wait();
    let handed: BTreeSet<String> =
        std::fs::read_to_string(&got).unwrap_or_default().lines().map(String::from).collect();
    let (n, problems) = check(&ws, &handed);
    (done, n, problems)
}

/// Every delivered message has exactly one `send` event, qa logged no `skip`, and every
/// message in qa's INBOX was `handed` to the hook; returns (messages delivered, problems).
fn check(ws: &Workspace, handed: &BTreeSet<String>) -> (usize, Vec<String>) {
    let mut problems = Vec::new();
    let log = events(ws);
    let mut sends_of: BTreeMap<String, usize> = BTreeMap::new();
    for e in log.iter().filter(|e| e.event == EventKind::Send) {
        *sends_of.entry(e.msg_id.clone().unwrap_or_default()).or_default() += 1;
    }
    let copies = delivered(ws);
    let ids: BTreeSet<&str> = copies.iter().map(|(_, id)| id.as_str()).collect();
    for id in &ids {
        match sends_of.get(*id).copied().unwrap_or(0) {
            1 => {}
            n => problems.push(format!("delivered message {id} has {n} send events")),
        }
    }
    for e in log.iter().filter(|e| e.event == EventKind::Skip && e.agent == "qa") {
        problems.push(format!("qa's watcher judged a message stale: {}", e.to_line()));
    }
    for (b, id) in &copies {
        if b == "inbox:qa" && !handed.contains(id) {
            problems.push(format!("message {id} in qa's INBOX was never handed to the hook"));
        }
    }
    (ids.len(), problems)
}

/// Fast slice: 4 senders, 15 kills, on `kept`'s root.
fn fast(kept: Kept) {
    if !kept.here() {
        return;
    }
    let t = Instant::now();
    let (kills, n, problems) = run(kept, (4, scaled(20), 15), &[], Duration::from_secs(90));
    eprintln!("sendlog ({kept:?}): {n} delivered, {kills} kills, {:?}", t.elapsed());
    assert!(n >= 4 * 10, "too few sends landed: {n}");
    assert!(problems.is_empty(), "{} problems: {:#?}", problems.len(), problems);
}

#[test]
fn every_killed_send_is_logged_once_and_in_its_senders_order() {
    fast(Kept::Folder);
}

#[test]
fn every_killed_send_is_logged_once_and_in_its_senders_order_on_postgres() {
    fast(Kept::Postgres);
}

/// The problems `break_` (a `CIRCE_TEST_BREAK` variant) leads to on `kept`'s root that
/// `wanted` picks, played again (more kills each try) until some are seen; `None` when the
/// engine cannot run here.
fn caught(kept: Kept, break_: &str, wanted: fn(&str) -> bool) -> Option<Vec<String>> {
    if !kept.here() {
        return None;
    }
    let env = [("CIRCE_TEST_BREAK", break_)];
    let what = format!("sendlog checker ({kept:?}, {break_})");
    Some(until_caught(&what, 4, Duration::from_secs(240), |i| {
        let (_, _, p) = run(kept, (4, scaled(20), 15 + 10 * i), &env, Duration::from_secs(90));
        p.into_iter().filter(|p| wanted(p)).collect()
    }))
}

fn stale_or_unhanded(p: &str) -> bool {
    p.contains("stale") || p.contains("never handed")
}

fn without_event(p: &str) -> bool {
    p.contains("0 send events")
}

/// The checker catches a cut-off send's event logged after the sender's next one (a
/// watcher then judges it stale): the next send no longer settles its sender's journals.
#[test]
fn sendlog_checker_catches_late_events_out_of_order() {
    let problems = caught(Kept::Folder, "no-sender-settle", stale_or_unhanded).unwrap();
    assert!(!problems.is_empty(), "no stale hand-on seen with the sender's settling off");
    eprintln!("no-sender-settle caught: {:?}", &problems[..problems.len().min(3)]);
}

/// The same on a database root: the sender's hold no longer settles its numbered journals.
#[test]
fn sendlog_checker_catches_late_events_out_of_order_on_postgres() {
    let Some(problems) = caught(Kept::Postgres, "no-sender-settle", stale_or_unhanded) else {
        return;
    };
    assert!(!problems.is_empty(), "no stale hand-on seen with the sender's settling off");
    eprintln!("no-sender-settle caught (postgres): {:?}", &problems[..problems.len().min(3)]);
}

/// The checker catches a delivered message left without its event: no journal is kept.
#[test]
fn sendlog_checker_catches_a_lost_event() {
    let problems = caught(Kept::Folder, "no-journal", without_event).unwrap();
    assert!(!problems.is_empty(), "no delivered message without its event seen without journals");
    eprintln!("no-journal caught: {:?}", &problems[..problems.len().min(3)]);
}

/// The same on a database root.
#[test]
fn sendlog_checker_catches_a_lost_event_on_postgres() {
    let Some(problems) = caught(Kept::Postgres, "no-journal", without_event) else { return };
    assert!(!problems.is_empty(), "no delivered message without its event seen without journals");
    eprintln!("no-journal caught (postgres): {:?}", &problems[..problems.len().min(3)]);
}

/// Long run: 8 senders x 300 sends, 200 kills, on `kept`'s root.
fn long(kept: Kept) {
    if !kept.here() {
        return;
    }
    let t = Instant::now();
    let (kills, n, problems) =
        run(kept, (8, scaled(300), scaled(200)), &[], Duration::from_secs(600));
    eprintln!("sendlog long ({kept:?}): {n} delivered, {kills} kills, {:?}", t.elapsed());
    assert!(problems.is_empty(), "{} problems: {:#?}", problems.len(), problems);
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn every_killed_send_is_logged_once_long() {
    long(Kept::Folder);
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn every_killed_send_is_logged_once_long_on_postgres() {
    long(Kept::Postgres);
}
