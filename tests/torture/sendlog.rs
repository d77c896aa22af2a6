//! Senders SIGKILLed at random while qa's watcher hands each message on to a hook: a send
//! cut off between its delivery and its event leaves the event to the sender's next send,
//! which logs it before its own (PROTOCOLS.md section 6, step 6). Afterwards every delivered
//! message has exactly one `send` event, and the watcher judged none stale (no `skip` by qa,
//! every message in qa's INBOX handed to the hook), without doctor having run.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use circe::engine::RootSpec;
use circe::message::{Format, Message};
use circe::names::AgentName;
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

/// Every message file in the INBOXes: (box, msg id).
fn delivered(r: &Root) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for a in std::fs::read_dir(r.dir.join("AGENTS")).unwrap().flatten() {
        let agent = a.file_name().to_string_lossy().into_owned();
        let Ok(rd) = std::fs::read_dir(a.path().join("INBOX")) else { continue };
        for f in rd.flatten() {
            let Ok(bytes) = std::fs::read(f.path()) else { continue };
            let Ok(m) = circe::message::parse_bytes(&bytes, circe::message::Mode::Draft) else {
                continue;
            };
            out.push((format!("inbox:{agent}"), m.msg_id.unwrap_or_default()));
        }
    }
    out
}

fn events(r: &Root) -> Vec<serde_json::Value> {
    std::fs::read_to_string(r.dir.join("LOGS/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `agents` senders (e1..eN), `sends` each, `kills` SIGKILLs spread over the run; returns
/// (kills, messages delivered, problems).
pub fn run(
    agents: usize,
    sends: usize,
    kills: usize,
    env: &[(&str, &str)],
    limit: Duration,
) -> (usize, usize, Vec<String>) {
    let r = Root::new(agents);
    let got = r.tmp.path().join("got");
    let hook = format!("echo \"$CIRCE_MSG_ID\" >> {}", got.display());
    let mut watcher = r
        .cmd(Some("qa"), &["watch", "--cursor", "q", "--kind", "send", "--exec", &hook], env)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The cursor is saved once the stream opens: from then on nothing is missed.
    let start = Instant::now();
    while !r.dir.join("cursors/events/q").exists() {
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
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = std::fs::read_to_string(&got).unwrap_or_default();
        if last.iter().all(|id| seen.lines().any(|l| l == id)) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = watcher.kill();
    let _ = watcher.wait();

    let mut problems = Vec::new();
    let log = events(&r);
    let mut sends_of: BTreeMap<String, usize> = BTreeMap::new();
    for e in log.iter().filter(|e| e["event"] == "send") {
        *sends_of.entry(e["msg_id"].as_str().unwrap_or_default().to_string()).or_default() += 1;
    }
    let copies = delivered(&r);
    let ids: BTreeSet<&str> = copies.iter().map(|(_, id)| id.as_str()).collect();
    for id in &ids {
        match sends_of.get(*id).copied().unwrap_or(0) {
            1 => {}
            n => problems.push(format!("delivered message {id} has {n} send events")),
        }
    }
    for e in log.iter().filter(|e| e["event"] == "skip" && e["agent"] == "qa") {
        problems.push(format!("qa's watcher judged a message stale: {e}"));
    }
    let handed: BTreeSet<String> =
        std::fs::read_to_string(&got).unwrap_or_default().lines().map(String::from).collect();
    for (b, id) in &copies {
        if b == "inbox:qa" && !handed.contains(id) {
            problems.push(format!("message {id} in qa's INBOX was never handed to the hook"));
        }
    }
    (done, ids.len(), problems)
}

/// Fast slice: 4 senders, 15 kills.
#[test]
fn every_killed_send_is_logged_once_and_in_its_senders_order() {
    let t = Instant::now();
    let (kills, n, problems) = run(4, scaled(20), 15, &[], Duration::from_secs(90));
    eprintln!("sendlog: {n} delivered, {kills} kills, {:?}", t.elapsed());
    assert!(n >= 4 * 10, "too few sends landed: {n}");
    assert!(problems.is_empty(), "{} problems: {:#?}", problems.len(), problems);
}

/// The checker catches a cut-off send's event logged after the sender's next one (a
/// watcher then judges it stale): the next send no longer settles its sender's journals.
#[test]
fn sendlog_checker_catches_late_events_out_of_order() {
    let problems = until_caught("sendlog order checker", 4, Duration::from_secs(240), |i| {
        let env = [("CIRCE_TEST_BREAK", "no-sender-settle")];
        let (_, _, p) = run(4, scaled(20), 15 + 10 * i, &env, Duration::from_secs(90));
        p.into_iter().filter(|p| p.contains("stale") || p.contains("never handed")).collect()
    });
    assert!(!problems.is_empty(), "no stale hand-on seen with the sender's settling off");
    eprintln!("no-sender-settle caught: {:?}", &problems[..problems.len().min(3)]);
}

/// The checker catches a delivered message left without its event: no journal is kept.
#[test]
fn sendlog_checker_catches_a_lost_event() {
    let problems = until_caught("sendlog event checker", 4, Duration::from_secs(240), |i| {
        let env = [("CIRCE_TEST_BREAK", "no-journal")];
        let (_, _, p) = run(4, scaled(20), 15 + 10 * i, &env, Duration::from_secs(90));
        p.into_iter().filter(|p| p.contains("0 send events")).collect()
    });
    assert!(!problems.is_empty(), "no delivered message without its event seen without journals");
    eprintln!("no-journal caught: {:?}", &problems[..problems.len().min(3)]);
}

/// Long run: 8 senders x 300 sends, 200 kills.
#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn every_killed_send_is_logged_once_long() {
    let (kills, n, problems) = run(8, scaled(300), scaled(200), &[], Duration::from_secs(600));
    eprintln!("sendlog long: {n} delivered, {kills} kills");
    assert!(problems.is_empty(), "{} problems: {:#?}", problems.len(), problems);
}
