//! Sequence numbers under concurrent senders and kill -9: agents send at once (two
//! processes per agent, so one agent's sends race each other), to agents, to `all`, task
//! messages and numbered chat lines; a random worker is SIGKILLed every few ms and started
//! again under the same name. Afterwards every sender's delivered numbers are exactly 1..max
//! (no duplicate, no gap) and each process saw its own numbers strictly increase.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use circe::boxes::Mailbox;
use circe::engine::RootSpec;
use circe::message::{Format, Message};
use circe::names::AgentName;
use circe::workspace::Workspace;

use crate::caught::until_caught;
use crate::common::{Rng, Root, log_line, numbered, numbering_problems, scaled, spawn_worker};

/// Worker: `n` sends by `me`, each logged `SENT <me> <pid> <epoch> <n>` once delivered.
pub fn worker(args: &[String]) {
    let me = AgentName::new(&args[0]).unwrap();
    let sends: usize = args[1].parse().unwrap();
    let mut rng = Rng(args[2].parse::<u64>().unwrap() | 1);
    let log = Path::new(&args[3]);
    let root = std::path::PathBuf::from(std::env::var("CIRCE_ROOT").unwrap());
    let targets = ["qa", "coordinator", "e1", "e2", "all"];
    for i in 0..sends {
        let ws = Workspace::open(&RootSpec::Path(root.clone())).unwrap();
        let pick = rng.below(10);
        let got = if pick == 9 {
            circe::chat::say::say(&ws, &me, "qa", &[], &format!("line {i}"), false, true).map(|m| {
                let l = circe::seq::parse_line(&m.message).unwrap();
                (l.epoch, l.seq.unwrap())
            })
        } else {
            let mut m = Message::new(Format::Circe);
            let to = targets[rng.below(targets.len())];
            m.to = Some(if to == me.as_str() { "qa".into() } else { to.into() });
            m.intent = Some("inform".into());
            if pick == 8 {
                m.intent = Some("task".into());
                m.task_id = Some(format!("T-{me}-{}-{i}", std::process::id()));
            }
            m.body = format!("## Summary\n{me} {i}\n");
            circe::ops::send(&ws, &me, m).map(|d| {
                let c = &d.delivered[0];
                let b = Mailbox::from_label(&c.mailbox).unwrap_or(Mailbox::NewMessages);
                let bytes = ws.engine.read_message(&b, &c.file).unwrap();
                let m = circe::message::parse_bytes(&bytes, circe::message::Mode::Draft).unwrap();
                (m.seq_epoch.unwrap_or(0), m.seq.unwrap())
            })
        };
        match got {
            Ok((e, n)) => log_line(log, &format!("SENT {me} {} {e} {n}", std::process::id())),
            Err(e) => log_line(log, &format!("ERR {me} {:?} {}", e.kind, e.chain())),
        }
    }
}

pub struct Run {
    pub numbered: usize,
    pub kills: usize,
    /// Numbered sends a kill left half-way, settled afterwards (finished or undone).
    pub settled: usize,
    pub problems: Vec<String>,
}

/// `agents` senders (e1..eN), `procs` processes each, `sends` sends per process, `kills`
/// SIGKILLs spread over the run.
pub fn run(
    agents: usize,
    procs: usize,
    sends: usize,
    kills: usize,
    env: &[(&str, &str)],
    limit: Duration,
) -> Run {
    let r = Root::new(agents.max(2));
    let logs = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let start = Instant::now();
    let spawn = |slot: usize, generation: usize| -> Child {
        let args = vec![
            format!("e{}", slot % agents + 1),
            sends.to_string(),
            (slot * 7919 + generation + 1).to_string(),
            logs.path().join(format!("w{slot}.log")).display().to_string(),
        ];
        spawn_worker("seq", &args, &r.dir, env)
    };
    let mut kids: Vec<Child> = (0..agents * procs).map(|s| spawn(s, 0)).collect();
    let done =
        crate::common::kill_storm(&mut kids, &spawn, (kills, start, limit), (5, 25), &mut rng);
    let mut problems = Vec::new();
    // What the killed senders left half-way: settled as their next send would.
    r.doctor(true);
    let (code, v) = r.doctor(false);
    if code != 0 {
        problems.push(format!("doctor after --repair: {v:?}"));
    }
    problems.extend(r.task_problems());
    let items = numbered(&r);
    problems.extend(numbering_problems(&items));
    let events = std::fs::read_to_string(r.dir.join("LOGS/events.jsonl")).unwrap_or_default();
    let settled = events
        .lines()
        .filter(|l| {
            l.contains("\"repair\"") && (l.contains("numbered send") || l.contains("chat line"))
        })
        .count();
    // Each process saw its own numbers strictly increase.
    let mut last: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for e in std::fs::read_dir(logs.path()).unwrap().flatten() {
        for line in std::fs::read_to_string(e.path()).unwrap().lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if f[0] != "SENT" {
                // Every send must succeed: a sender waits for its own lock.
                problems.push(format!("worker: {line}"));
                continue;
            }
            let at: (u64, u64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
            let key = (f[1].to_string(), f[2].to_string());
            if let Some(prev) = last.insert(key, at).filter(|prev| *prev >= at) {
                problems.push(format!("{} (pid {}): #{at:?} after #{prev:?}", f[1], f[2]));
            }
        }
    }
    Run { numbered: items.len(), kills: done, settled, problems }
}

/// Fast slice: 4 agents x 2 processes, 15 kills.
#[test]
fn numbers_are_gap_free_and_unique_under_racing_senders_and_kill_9() {
    let t = Instant::now();
    let r = run(4, 2, scaled(15), 15, &[], Duration::from_secs(60));
    eprintln!(
        "seq: {} numbered, {} kills, {} half-way sends settled, {:?}",
        r.numbered,
        r.kills,
        r.settled,
        t.elapsed()
    );
    assert!(r.numbered >= 4 * 2 * 10, "too few sends landed: {}", r.numbered);
    assert!(r.problems.is_empty(), "{} problems: {:#?}", r.problems.len(), r.problems);
}

/// The checker catches two senders given one number: the per-sender lock (and the entry's
/// no-clobber rename) switched off.
#[test]
fn numbering_checker_catches_racing_senders_without_the_lock() {
    let problems = until_caught("numbering checker", 3, Duration::from_secs(150), |_| {
        let env = [("CIRCE_TEST_BREAK", "seq-race")];
        let r = run(2, 4, scaled(15), 0, &env, Duration::from_secs(60));
        r.problems.into_iter().filter(|p| p.contains("given to")).collect()
    });
    assert!(!problems.is_empty(), "no duplicate number seen with the lock off");
    eprintln!("seq-race caught: {:?}", &problems[..problems.len().min(3)]);
}

/// The checker itself: a gap and a duplicate are both reported.
#[test]
fn numbering_checker_sees_gaps_and_duplicates() {
    let item = |s: &str, e, n, id: &str| (s.to_string(), e, n, id.to_string());
    let ok = [item("a", 0, 1, "x"), item("a", 0, 2, "y"), item("a", 1, 1, "z")];
    assert!(numbering_problems(&ok).is_empty());
    let gap = [item("a", 0, 1, "x"), item("a", 0, 3, "y")];
    assert!(numbering_problems(&gap)[0].contains("missing"), "{:?}", numbering_problems(&gap));
    let dup = [item("a", 0, 1, "x"), item("a", 0, 1, "y")];
    assert!(numbering_problems(&dup)[0].contains("given to 2"));
}

/// Long run: 8 agents x 2 processes, 300 sends each, 200 kills.
#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn numbers_under_kill_storm_long() {
    let t = Instant::now();
    let r = run(8, 2, scaled(300), scaled(200), &[], Duration::from_secs(600));
    eprintln!(
        "seq long: {} numbered, {} kills, {} half-way sends settled, {:?}",
        r.numbered,
        r.kills,
        r.settled,
        t.elapsed()
    );
    assert!(r.problems.is_empty(), "{} problems: {:#?}", r.problems.len(), r.problems);
}
