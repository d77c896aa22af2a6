//! Crash points: every command that reaches a named step is run with
//! `CIRCE_CRASH_AT=<step>` (exit 86, no cleanup), then the next ordinary commands, then
//! the checks: ordinary commands alone must have rolled the records forward (only tmp/
//! leftovers may remain for doctor), `doctor --repair` then `doctor` must be clean, and no
//! message that existed before the crash is lost or duplicated.

use std::collections::BTreeMap;

use circe::task::record::OwnerRecord;

use crate::common::{Root, lost_or_duplicated, numbered, numbering_problems};

/// Every named step a command can reach. A message a command sends goes through the
/// numbered steps `seq.*`; a task change's outbox (a `task-complete`, a park's escalation)
/// through `outbox.*`; `put_message`'s own steps (`send.staged`, `send.delivered`) are
/// reached by the outbox of a task change (tests/torture/route.rs), and the fan-out batch's
/// (`send.fanout.committed`, `send.fanout`) only by a delivery with no sequence hold, which
/// no command makes.
pub const POINTS: [&str; 30] = [
    "seq.staged",
    "seq.outbox.staged",
    "seq.committed",
    "seq.delivered",
    "seq.chat.staged",
    "seq.chat.written",
    "send.recorded",
    "send.committed",
    "send.logging",
    "send.logged",
    "handoff.recorded",
    "handoff.delivered",
    "move.renamed",
    "record.status",
    "record.owner",
    "record.checks",
    "claim.before_rename",
    "claim.renamed",
    "claim.recorded",
    "park.renamed",
    "expire.renamed",
    "release.renamed",
    "release.recorded",
    "status.recorded",
    "heartbeat.recorded",
    "check.ran",
    "check.recorded",
    "task.logged",
    "outbox.delivered",
    "outbox.cleared",
];

/// One command line: agent, arguments, pinned clock.
type Step = (Option<&'static str>, &'static [&'static str], Option<&'static str>);

pub struct Scenario {
    pub name: &'static str,
    pub setup: &'static [Step],
    pub cmd: Step,
    pub next: &'static [Step],
}

const OPEN: Step = (
    Some("coordinator"),
    &["send", "--to", "all", "--intent", "implement_feature", "--task", "T1", "--summary", "x"],
    None,
);
const CLAIM: Step = (Some("engineer"), &["claim", "T1"], None);
const TASKS: Step = (None, &["tasks"], None);
const RELEASE: Step = (Some("engineer"), &["release", "T1"], None);
/// T1 held and ready to complete, and the message that completes it.
const READY: &[Step] = &[
    OPEN,
    CLAIM,
    (Some("engineer"), &["status", "T1", "in_progress"], None),
    (Some("engineer"), &["check", "T1", "tests_passed=true"], None),
];
const TASK_COMPLETE: Step = (
    Some("engineer"),
    &[
        "send",
        "--to",
        "coordinator",
        "--intent",
        "task-complete",
        "--task",
        "T1",
        "--summary",
        "done",
    ],
    None,
);
const T0: Option<&str> = Some("2030-01-01T00:00:00Z");
const T1: Option<&str> = Some("2030-01-02T00:00:00Z");
const T2: Option<&str> = Some("2030-01-03T00:00:00Z");
const T3: Option<&str> = Some("2030-01-04T00:00:00Z");

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "send_task",
        setup: &[],
        cmd: OPEN,
        next: &[TASKS, (Some("e1"), &["claim", "T1"], None)],
    },
    Scenario {
        name: "send_fanout",
        setup: &[],
        cmd: (
            Some("coordinator"),
            &["send", "--to", "all", "--intent", "ask", "--summary", "hi"],
            None,
        ),
        next: &[TASKS],
    },
    Scenario {
        name: "chat_seq",
        setup: &[(Some("coordinator"), &["chat", "say", "--seq", "--to", "qa", "first"], None)],
        cmd: (Some("coordinator"), &["chat", "say", "--seq", "--to", "qa", "second"], None),
        next: &[(Some("coordinator"), &["chat", "say", "--seq", "--to", "qa", "third"], None)],
    },
    Scenario {
        name: "task_complete",
        setup: READY,
        cmd: TASK_COMPLETE,
        next: &[
            TASKS,
            (
                Some("engineer"),
                &["send", "--to", "qa", "--intent", "inform", "--summary", "z"],
                None,
            ),
            // The task's next command delivers a change's messages a crash left.
            (Some("engineer"), &["done", "T1"], None),
        ],
    },
    Scenario {
        name: "handoff",
        setup: &[OPEN, CLAIM],
        cmd: (
            Some("engineer"),
            &["send", "--to", "qa", "--intent", "test", "--task", "T1", "--summary", "y"],
            None,
        ),
        next: &[TASKS, (Some("qa"), &["claim", "T1"], None)],
    },
    Scenario {
        name: "claim",
        setup: &[OPEN],
        cmd: CLAIM,
        next: &[TASKS, (Some("e1"), &["claim", "T1"], None)],
    },
    Scenario {
        name: "claim_next",
        setup: &[OPEN],
        cmd: (Some("engineer"), &["claim", "--next"], None),
        next: &[
            TASKS,
            (Some("e1"), &["claim", "--next"], None),
            (Some("e1"), &["claim", "T1"], None),
        ],
    },
    Scenario {
        name: "takeover",
        setup: &[(OPEN.0, OPEN.1, T0), (Some("engineer"), &["claim", "T1", "--ttl", "1s"], T0)],
        cmd: (Some("e1"), &["claim", "T1"], T1),
        next: &[(None, &["tasks"], T1), (Some("e2"), &["claim", "T1"], T1)],
    },
    Scenario {
        name: "park",
        setup: &[
            (OPEN.0, OPEN.1, T0),
            (Some("engineer"), &["claim", "T1", "--ttl", "1s"], T0),
            (Some("e1"), &["claim", "T1", "--ttl", "1s"], T1),
            (Some("engineer"), &["claim", "T1", "--ttl", "1s"], T2),
        ],
        cmd: (Some("e1"), &["claim", "T1"], T3),
        next: &[(None, &["tasks"], T3), (Some("e2"), &["claim", "T1"], T3)],
    },
    Scenario {
        name: "reap",
        setup: &[(OPEN.0, OPEN.1, T0), (Some("engineer"), &["claim", "T1", "--ttl", "1s"], T0)],
        cmd: (Some("coordinator"), &["reap"], T1),
        next: &[(None, &["tasks"], T1), (Some("e2"), &["claim", "T1"], T1)],
    },
    Scenario {
        name: "release",
        setup: &[OPEN, CLAIM],
        cmd: RELEASE,
        next: &[TASKS, (Some("e1"), &["claim", "T1"], None)],
    },
    Scenario {
        name: "status",
        setup: &[OPEN, CLAIM],
        cmd: (Some("engineer"), &["status", "T1", "in_progress"], None),
        next: &[TASKS, (Some("engineer"), &["status", "T1", "blocked"], None)],
    },
    Scenario {
        name: "complete",
        setup: READY,
        cmd: (Some("engineer"), &["status", "T1", "completed"], None),
        next: &[
            TASKS,
            (Some("engineer"), &["done", "T1"], None),
            (Some("engineer"), &["heartbeat", "T1"], None),
        ],
    },
    Scenario {
        name: "heartbeat",
        setup: &[OPEN, CLAIM],
        cmd: (Some("engineer"), &["heartbeat", "T1"], None),
        next: &[TASKS, (Some("engineer"), &["heartbeat", "T1"], None)],
    },
    Scenario {
        name: "check",
        setup: &[OPEN, CLAIM],
        cmd: (Some("engineer"), &["check", "T1", "tests_passed=true"], None),
        next: &[TASKS, (Some("engineer"), &["check", "T1", "other=true"], None)],
    },
    Scenario {
        name: "check_run",
        setup: &[OPEN, CLAIM],
        cmd: (Some("engineer"), &["check", "T1", "--run", "tests_passed", "--", "true"], None),
        next: &[TASKS, (Some("engineer"), &["status", "T1", "completed"], None)],
    },
    Scenario {
        name: "take",
        setup: &[OPEN, CLAIM],
        cmd: (Some("engineer"), &["take", "T1"], None),
        next: &[TASKS, (Some("engineer"), &["status", "T1", "in_progress"], None)],
    },
    // Deadlines passed (each act of a `reap` alone, since each is whole on its own): a task
    // expires (its message into LOGS, the coordinators told), an unread message is filed
    // into LOGS, an ask expires and its asker is told.
    Scenario {
        name: "deadline_task",
        setup: &[(
            Some("coordinator"),
            &[
                "send",
                "--to",
                "all",
                "--intent",
                "implement_feature",
                "--task",
                "T1",
                "--summary",
                "x",
                "--deadline",
                "1h",
            ],
            T0,
        )],
        cmd: (Some("coordinator"), &["reap"], T1),
        next: &[(None, &["tasks"], T1), (Some("coordinator"), &["reap"], T1)],
    },
    Scenario {
        name: "deadline_message",
        setup: &[(
            Some("coordinator"),
            &["send", "--to", "e1", "--intent", "inform", "--summary", "y", "--deadline", "1h"],
            T0,
        )],
        cmd: (Some("coordinator"), &["reap"], T1),
        next: &[(Some("coordinator"), &["reap"], T1), (Some("e1"), &["inbox"], T1)],
    },
    Scenario {
        name: "deadline_ask",
        setup: &[
            (
                Some("e1"),
                &[
                    "send",
                    "--to",
                    "qa",
                    "--intent",
                    "ask",
                    "--summary",
                    "z",
                    "--deadline",
                    "1h",
                    "--msg-id",
                    "ask-1",
                ],
                T0,
            ),
            (Some("qa"), &["take", "ask-1"], T0),
        ],
        cmd: (Some("coordinator"), &["reap"], T1),
        next: &[(Some("coordinator"), &["reap"], T1), (Some("e1"), &["asks"], T1)],
    },
    // With `announce: inbox` (`root_for`): the change's status update rides in its outbox,
    // after a rename (a release) or beside a numbered message (a task-complete).
    Scenario {
        name: "announce_release",
        setup: &[OPEN, CLAIM],
        cmd: RELEASE,
        next: &[TASKS, (Some("e1"), &["claim", "T1"], None)],
    },
    Scenario {
        name: "announce_complete",
        setup: READY,
        cmd: TASK_COMPLETE,
        next: &[TASKS, (Some("engineer"), &["done", "T1"], None)],
    },
];

/// A new root for `sc`: two engineers, and `announce: inbox` for the `announce_*` ones.
pub fn root_for(sc: &Scenario) -> Root {
    let r = Root::new(2);
    if sc.name.starts_with("announce_") {
        let path = r.dir.join("circe.yaml");
        let cfg = std::fs::read_to_string(&path).unwrap();
        assert!(cfg.contains("announce: events"), "{cfg}");
        std::fs::write(&path, cfg.replace("announce: events", "announce: inbox")).unwrap();
    }
    r
}

fn run_step(r: &Root, s: &Step, crash: Option<&str>) -> crate::common::Out {
    let mut env = vec![];
    if let Some(now) = s.2 {
        env.push(("CIRCE_NOW", now));
    }
    if let Some(c) = crash {
        env.push(("CIRCE_CRASH_AT", c));
    }
    r.run_env(s.0, s.1, &env)
}

/// One crash run. Returns (reached, problems).
pub fn crash_run(
    sc: &Scenario,
    point: &str,
    env: &[(&str, &str)],
    repair: bool,
) -> (bool, Vec<String>) {
    let r = root_for(sc);
    for s in sc.setup {
        let o = run_step(&r, s, None);
        assert_eq!(o.code, 0, "{}: setup {s:?}: {o:?}", sc.name);
    }
    let before = r.messages();
    let start = outcome(&r);
    let mut cenv: Vec<(&str, &str)> = env.to_vec();
    cenv.push(("CIRCE_CRASH_AT", point));
    if let Some(now) = sc.cmd.2 {
        cenv.push(("CIRCE_NOW", now));
    }
    let o = r.run_env(sc.cmd.0, sc.cmd.1, &cenv);
    let mut p = Vec::new();
    let reached = o.code == 86;
    // Parking refuses the claim (exit 3) by design.
    let normal = if sc.name == "park" { 3 } else { 0 };
    if !reached && o.code != normal {
        p.push(format!("{} @ {point}: command failed with {}: {}", sc.name, o.code, o.stderr));
    }
    p.extend(after_repair(&r, sc, point, env, &start));
    for s in sc.next {
        let mut senv: Vec<(&str, &str)> = env.to_vec();
        if let Some(now) = s.2 {
            senv.push(("CIRCE_NOW", now));
        }
        let o = r.run_env(s.0, s.1, &senv);
        if ![0, 3, 4, 5, 6].contains(&o.code) {
            p.push(format!(
                "{} @ {point}: next {:?} exit {}: {}",
                sc.name,
                s.1,
                o.code,
                o.stderr.trim()
            ));
        }
    }
    // Roll forward by ordinary commands: only tmp/ leftovers may remain.
    let (_, v) = r.doctor(false);
    let not_tmp: Vec<&String> = v.iter().filter(|x| !x.starts_with("[1]")).collect();
    if !not_tmp.is_empty() {
        p.push(format!(
            "{} @ {point}: after ordinary commands doctor still sees {not_tmp:?}",
            sc.name
        ));
    }
    if repair {
        r.doctor(true);
        let (code, v) = r.doctor(false);
        if code != 0 {
            p.push(format!("{} @ {point}: after doctor --repair: exit {code} {v:?}", sc.name));
        }
    }
    p.extend(r.task_problems().into_iter().map(|x| format!("{} @ {point}: {x}", sc.name)));
    if repair {
        p.extend(send_events(&r).into_iter().map(|x| format!("{} @ {point}: {x}", sc.name)));
        p.extend(task_moves(&r).into_iter().map(|x| format!("{} @ {point}: {x}", sc.name)));
        // No mark of a step cut off is left in a record once doctor has repaired.
        for t in r.tasks() {
            let text = std::fs::read_to_string(r.dir.join(format!("TASKS/{t}.status")))
                .unwrap_or_default();
            if text.lines().any(|l| l.starts_with("handoff")) {
                p.push(format!("{} @ {point}: {t}.status keeps a handoff mark: {text}", sc.name));
            }
        }
    }
    let after = r.messages();
    p.extend(
        lost_or_duplicated(&before, &after)
            .into_iter()
            .map(|x| format!("{} @ {point}: {x}", sc.name)),
    );
    // Per sender, the numbers delivered are 1, 2, ... with no gap and no repeat.
    p.extend(
        numbering_problems(&numbered(&r))
            .into_iter()
            .map(|x| format!("{} @ {point}: {x}", sc.name)),
    );
    // Task messages exist exactly once (circe's escalation has one copy per recipient).
    for (n, b) in &after {
        if n.contains("_T1") && !n.contains("_escalate_") && b.len() > 1 {
            p.push(format!("{} @ {point}: {n} in {b:?}", sc.name));
        }
    }
    (reached, p)
}

/// What a command leaves, as the checker compares it: task T1's record (its times aside),
/// its checks, and how many messages each box holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    task: Option<String>,
    checks: String,
    boxes: BTreeMap<String, usize>,
}

fn outcome(r: &Root) -> Outcome {
    let task = r.status("T1").map(|s| {
        format!(
            "{} owner={:?} epoch={} attempts={} expiries={} to={} intent={}",
            s.status.as_str(),
            s.owner.map(|o| o.to_string()),
            s.epoch,
            s.attempts,
            s.expiries,
            s.to,
            s.intent
        )
    });
    let checks = std::fs::read_to_string(r.dir.join("TASKS/T1.checks")).unwrap_or_default();
    let mut boxes = BTreeMap::new();
    for (_, bs) in r.messages() {
        for b in bs {
            *boxes.entry(b).or_default() += 1;
        }
    }
    Outcome { task, checks, boxes }
}

/// The outcome of a scenario's command run whole, once per scenario.
fn uncut(sc: &Scenario) -> Outcome {
    static SEEN: std::sync::Mutex<BTreeMap<&str, Outcome>> = std::sync::Mutex::new(BTreeMap::new());
    if let Some(o) = SEEN.lock().unwrap().get(sc.name) {
        return o.clone();
    }
    let r = root_for(sc);
    for s in sc.setup {
        assert_eq!(run_step(&r, s, None).code, 0, "{}: setup {s:?}", sc.name);
    }
    run_step(&r, &sc.cmd, None);
    let o = outcome(&r);
    SEEN.lock().unwrap().insert(sc.name, o.clone());
    o
}

/// Right after the crash, a copy of the root is repaired by doctor (as built: `env`). There the cut-off
/// command either happened whole (as it leaves things run uncut) or not at all (`start`).
/// And a task that waits there is found by `claim --next` on the root itself, before any
/// repair: an agent the task is addressed to looks (`--dry-run`).
fn after_repair(
    r: &Root,
    sc: &Scenario,
    point: &str,
    env: &[(&str, &str)],
    start: &Outcome,
) -> Vec<String> {
    let name = sc.name;
    let copy = r.tmp.path().join("repaired");
    let cp = std::process::Command::new("cp").arg("-a").arg(&r.dir).arg(&copy).status().unwrap();
    assert!(cp.success());
    let fixed = Root::at(copy);
    fixed.doctor_env(true, env);
    let mut p = Vec::new();
    let now = outcome(&fixed);
    let whole = uncut(sc);
    if now != *start && now != whole {
        p.push(format!(
            "{name} @ {point}: once repaired, neither done whole nor undone:\n  repaired: {now:?}\n  whole:    {whole:?}\n  undone:   {start:?}"
        ));
    }
    let Some(rec) = fixed.status("T1") else { return p };
    if rec.status != circe::task::Status::New {
        return p;
    }
    let agent = if rec.to == "qa" { "qa" } else { "e2" };
    let o = r.run_env(Some(agent), &["claim", "--next", "--dry-run", "--json"], env);
    if o.code == 0 && o.stdout.contains("\"T1\"") {
        return p;
    }
    p.push(format!(
        "{name} @ {point}: T1 waits once repaired, but {agent}'s claim --next finds it not before (exit {}): {}",
        o.code,
        o.stderr.trim()
    ));
    p
}

/// Every message that is no task's (its file name names no task) and that an agent sent
/// has exactly one `send` event in the log, once doctor has repaired what a crash left.
fn send_events(r: &Root) -> Vec<String> {
    let log = std::fs::read_to_string(r.dir.join("LOGS/events.jsonl")).unwrap_or_default();
    let mut sent: BTreeMap<String, usize> = BTreeMap::new();
    for v in log.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
        if v["event"] == "send"
            && let Some(id) = v["msg_id"].as_str()
        {
            *sent.entry(id.to_string()).or_default() += 1;
        }
    }
    let mut p = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, boxes) in r.messages() {
        if name.contains("_T1") {
            continue;
        }
        for b in boxes {
            let dir = match b.split_once(':') {
                Some((kind, a)) => r.dir.join("AGENTS").join(a).join(kind.to_uppercase()),
                None if b == "logs" => r.dir.join("LOGS"),
                None => r.dir.join("NEW_MESSAGES"),
            };
            let text = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
            let from_circe = text.lines().any(|l| l == "from: circe");
            let id = text.lines().find_map(|l| l.strip_prefix("msg_id: ")).unwrap_or_default();
            if from_circe || id.is_empty() || !seen.insert(id.to_string()) {
                continue;
            }
            match sent.get(id).copied().unwrap_or(0) {
                1 => {}
                n => p.push(format!("message {id} ({name}) has {n} send events")),
            }
        }
    }
    p
}

/// Every task's moves in the log follow on from each other (each event's `from` is the
/// `to` before it) and end where its record stands, at its epoch, once doctor has repaired
/// what a crash left: a change that stands has its event.
pub fn task_moves(r: &Root) -> Vec<String> {
    let log = std::fs::read_to_string(r.dir.join("LOGS/events.jsonl")).unwrap_or_default();
    let mut last: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let mut p = Vec::new();
    for v in log.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
        let (Some(t), Some(to)) = (v["task_id"].as_str(), v["to"].as_str()) else { continue };
        let epoch = v["epoch"].as_u64().unwrap_or_default();
        if let (Some(from), Some((was, _))) = (v["from"].as_str(), last.get(t))
            && from != was
        {
            p.push(format!(
                "task {t}: event {} moves from {from}, but the one before left it {was}",
                v["id"]
            ));
        }
        last.insert(t.to_string(), (to.to_string(), epoch));
    }
    for t in r.tasks() {
        let Ok(text) = std::fs::read_to_string(r.dir.join(format!("TASKS/{t}.status"))) else {
            continue;
        };
        let field = |k: &str| {
            text.lines().find_map(|l| l.strip_prefix(k)).unwrap_or_default().trim().to_string()
        };
        let now = (field("status:"), field("epoch:").parse().unwrap_or(u64::MAX));
        if last.get(&t) != Some(&now) {
            p.push(format!(
                "task {t}: record at {now:?}, the log's last move at {:?}",
                last.get(&t)
            ));
        }
    }
    p
}

/// Which scenario reaches which crash point (found by the full matrix, `crash_matrix_full`).
const REACHED: &[(&str, &[&str])] = &[
    ("seq.staged", &["send_task", "send_fanout", "handoff", "deadline_ask"]),
    ("seq.committed", &["send_task", "send_fanout", "handoff", "deadline_ask"]),
    ("seq.delivered", &["send_task", "send_fanout", "handoff", "deadline_ask"]),
    ("seq.outbox.staged", &["task_complete", "announce_complete"]),
    ("seq.chat.staged", &["chat_seq"]),
    ("seq.chat.written", &["chat_seq"]),
    ("send.recorded", &["send_task"]),
    ("send.committed", &["send_task"]),
    ("handoff.recorded", &["handoff"]),
    ("handoff.delivered", &["handoff"]),
    (
        "move.renamed",
        &[
            "claim",
            "claim_next",
            "takeover",
            "park",
            "reap",
            "release",
            "take",
            "announce_release",
            "deadline_task",
            "deadline_message",
        ],
    ),
    (
        "record.status",
        &[
            "send_task",
            "handoff",
            "claim",
            "claim_next",
            "takeover",
            "park",
            "reap",
            "release",
            "status",
            "complete",
            "heartbeat",
            "deadline_task",
        ],
    ),
    (
        "record.owner",
        &[
            "handoff",
            "claim",
            "claim_next",
            "takeover",
            "park",
            "reap",
            "release",
            "status",
            "complete",
            "heartbeat",
            "deadline_task",
        ],
    ),
    ("send.logging", &["send_fanout", "task_complete", "announce_complete", "deadline_ask"]),
    ("send.logged", &["send_fanout", "deadline_ask"]),
    ("record.checks", &["send_task", "check", "check_run"]),
    ("claim.before_rename", &["claim", "claim_next", "takeover"]),
    ("claim.renamed", &["claim", "claim_next", "takeover"]),
    ("claim.recorded", &["claim", "claim_next", "takeover"]),
    ("park.renamed", &["park"]),
    ("expire.renamed", &["reap"]),
    ("release.renamed", &["release", "announce_release"]),
    ("release.recorded", &["release", "announce_release"]),
    ("status.recorded", &["status", "complete", "task_complete", "announce_complete"]),
    ("heartbeat.recorded", &["heartbeat"]),
    (
        "outbox.delivered",
        &["task_complete", "park", "announce_release", "announce_complete", "deadline_task"],
    ),
    (
        "outbox.cleared",
        &["task_complete", "park", "announce_release", "announce_complete", "deadline_task"],
    ),
    ("check.ran", &["check_run"]),
    ("check.recorded", &["check", "check_run"]),
    (
        "task.logged",
        &[
            "send_task",
            "task_complete",
            "handoff",
            "claim",
            "claim_next",
            "takeover",
            "park",
            "reap",
            "release",
            "status",
            "complete",
            "check",
            "check_run",
            "take",
            "announce_release",
            "announce_complete",
            "deadline_task",
        ],
    ),
];

/// Fast slice: every (scenario, point) pair that reaches its point.
#[test]
fn every_crash_point_recovers() {
    let t = std::time::Instant::now();
    let mut problems = Vec::new();
    let mut runs = 0;
    for (point, names) in REACHED {
        for name in *names {
            let sc = SCENARIOS.iter().find(|s| s.name == *name).unwrap();
            runs += 1;
            let (hit, pr) = crash_run(sc, point, &[], true);
            if !hit {
                problems.push(format!("{name} no longer reaches {point}"));
            }
            problems.extend(pr);
            assert!(t.elapsed().as_secs() < 90, "crash slice over its time limit");
        }
    }
    let mut all: Vec<&str> = POINTS.to_vec();
    all.sort_unstable();
    all.dedup();
    for p in all {
        assert!(REACHED.iter().any(|(q, _)| *q == p), "crash point {p} is in no scenario");
    }
    eprintln!("crash slice: {runs} crash runs, {:?}", t.elapsed());
    assert!(problems.is_empty(), "{} problems: {problems:#?}", problems.len());
}

/// Long run: every scenario against every point (unreached ones must leave things clean too).
#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn crash_matrix_full() {
    let t = std::time::Instant::now();
    let mut reached: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut runs = 0;
    let mut points: Vec<&str> = POINTS.to_vec();
    points.sort_unstable();
    points.dedup();
    for sc in SCENARIOS {
        for p in &points {
            runs += 1;
            let (hit, pr) = crash_run(sc, p, &[], true);
            if hit {
                reached.entry(p).or_default().push(sc.name);
            }
            problems.extend(pr);
            assert!(t.elapsed().as_secs() < 240, "crash matrix over its time limit");
        }
    }
    eprintln!("crash matrix: {runs} runs, {} points reached, {:?}", reached.len(), t.elapsed());
    for (p, s) in &reached {
        eprintln!("  {p}: {s:?}");
    }
    assert!(problems.is_empty(), "{} problems: {problems:#?}", problems.len());
    assert_eq!(reached.len(), points.len(), "some crash points were never reached");
}

/// Ordinary commands alone finish a claim that crashed after its rename: another agent's
/// claim and `tasks` see the crashed claimer as owner.
#[test]
fn claim_crash_rolls_forward_without_doctor() {
    for point in ["move.renamed", "claim.renamed", "record.status"] {
        let r = Root::new(2);
        r.open("T1");
        let o = r.run_env(Some("engineer"), &["claim", "T1"], &[("CIRCE_CRASH_AT", point)]);
        assert_eq!(o.code, 86, "{point}: {o:?}");
        let o = r.run(Some("e1"), &["claim", "T1"]);
        assert_eq!(o.code, 4, "{point}: e1 must lose to the crashed claimer: {o:?}");
        assert!(o.stderr.contains("engineer"), "{point}: {o:?}");
        let tasks = r.ok(None, &["tasks"]).stdout;
        assert!(
            tasks.lines().any(|l| l.starts_with("T1") && l.contains("engineer")),
            "{point}: {tasks}"
        );
        let rec = r.status("T1").unwrap();
        assert_eq!(rec.owner.as_deref(), Some("engineer"), "{point}");
        assert!(r.task_problems().is_empty(), "{point}: {:?}", r.task_problems());
    }
}

/// The crash checker fails when roll-forward is switched off and doctor does not repair.
#[test]
fn crash_checker_catches_no_reconcile() {
    let sc = SCENARIOS.iter().find(|s| s.name == "claim").unwrap();
    let (hit, p) = crash_run(sc, "claim.renamed", &[("CIRCE_TEST_BREAK", "no-reconcile")], false);
    assert!(hit);
    assert!(!p.is_empty(), "the crash checker saw nothing with roll-forward disabled");
    eprintln!("no-reconcile caught: {p:?}");
}

/// A send to several inboxes is all or nothing across a crash, and so is its number: killed
/// before its commit point (the first copy leaving its entry) it delivers nothing and frees
/// its number; killed after it (or between two deliveries) `doctor --repair` delivers the
/// rest, so every recipient ends with exactly one copy, numbered #1.
/// The send-event checker fails when a send keeps no journal of its events: cut off after
/// its delivery, the message then has no `send` event, even after `doctor --repair`.
#[test]
fn crash_checker_catches_no_journal() {
    let sc = SCENARIOS.iter().find(|s| s.name == "send_fanout").unwrap();
    let (hit, p) = crash_run(sc, "send.logging", &[("CIRCE_TEST_BREAK", "no-journal")], true);
    assert!(hit);
    assert!(p.iter().any(|x| x.contains("has 0 send events")), "not caught: {p:?}");
}

#[test]
fn crash_checker_catches_no_task_journal() {
    // A status change cut off after its record, before its event: with no journal of its
    // events, the log skips the move and ends short of the record.
    let sc = SCENARIOS.iter().find(|s| s.name == "status").unwrap();
    let (hit, p) =
        crash_run(sc, "status.recorded", &[("CIRCE_TEST_BREAK", "no-task-journal")], true);
    assert!(hit);
    assert!(p.iter().any(|x| x.contains("moves from in_progress")), "not caught: {p:?}");
    let (hit, p) = crash_run(sc, "status.recorded", &[], true);
    assert!(hit && p.is_empty(), "{p:?}");
}

#[test]
fn crash_checker_catches_a_change_repaired_as_another() {
    // A reap cut off between its ticket's rename and its records: inferred from where the
    // ticket lies (the broken variant), it is repaired as a release, and the expired lease
    // goes uncounted; a park loses its status and its escalation.
    let reap = SCENARIOS.iter().find(|s| s.name == "reap").unwrap();
    let (hit, p) = crash_run(reap, "expire.renamed", &[("CIRCE_TEST_BREAK", "no-roll")], true);
    assert!(hit);
    assert!(p.iter().any(|x| x.contains("neither done whole nor undone")), "not caught: {p:?}");
    let park = SCENARIOS.iter().find(|s| s.name == "park").unwrap();
    let (hit, p) = crash_run(park, "park.renamed", &[("CIRCE_TEST_BREAK", "no-roll")], true);
    assert!(hit);
    assert!(p.iter().any(|x| x.contains("neither done whole nor undone")), "not caught: {p:?}");
    let (hit, p) = crash_run(park, "park.renamed", &[], true);
    assert!(hit && p.is_empty(), "{p:?}");
}

#[test]
fn crash_checker_catches_a_waiting_task_queued_after_its_commit_point() {
    // A release cut off after its records: queued only after the commit point (the broken
    // variant), the task waits in no lane and `claim --next` finds nothing until a repair.
    let sc = SCENARIOS.iter().find(|s| s.name == "release").unwrap();
    let (hit, p) = crash_run(sc, "release.recorded", &[("CIRCE_TEST_BREAK", "late-queue")], true);
    assert!(hit);
    assert!(p.iter().any(|x| x.contains("finds it not before (exit 6)")), "not caught: {p:?}");
    let (hit, p) = crash_run(sc, "release.recorded", &[], true);
    assert!(hit && p.is_empty(), "{p:?}");
}

#[test]
fn fanout_is_all_or_nothing() {
    let send = ["send", "--to", "all", "--intent", "inform", "--summary", "to everyone"];
    for (point, env, delivered) in [
        ("seq.staged", vec![("CIRCE_CRASH_AT", "seq.staged")], false),
        ("seq.committed", vec![("CIRCE_CRASH_AT", "seq.committed")], true),
        ("seq.delivered", vec![("CIRCE_CRASH_AT", "seq.delivered")], true),
        // An I/O error while staging (the 3rd store mutation): before the commit point.
        ("staging I/O error", vec![("CIRCE_FAIL_IO", "3")], false),
    ] {
        let root = Root::new(2);
        let out = root.run_env(Some("coordinator"), &send, &env);
        assert_ne!(out.code, 0, "{point}: the send should have been cut short: {out:?}");
        let (code, found) = root.doctor(true);
        assert_eq!(code, 0, "{point}: doctor --repair: {found:?}");
        let copies: Vec<(String, Vec<String>)> =
            root.messages().into_iter().filter(|(n, _)| n.contains("_inform")).collect();
        if delivered {
            // Every agent but the sender: coordinator's peers (engineer, qa, scribe, eagle,
            // rooster) and e1, e2.
            let holders = copies.iter().flat_map(|(_, b)| b.clone()).collect::<Vec<_>>();
            assert_eq!(holders.len(), 7, "{point}: one copy per recipient: {copies:?}");
            let mut unique = holders.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), 7, "{point}: no recipient twice: {holders:?}");
        } else {
            assert!(
                copies.is_empty(),
                "{point}: nothing may be delivered before the commit point: {copies:?}"
            );
        }
        // The number was used exactly when the message arrived: the next send is #1 or #2.
        root.ok(Some("coordinator"), &send);
        let items = numbered(&root);
        let want = if delivered { 2 } else { 1 };
        assert_eq!(items.len(), want, "{point}: {items:?}");
        let problems = numbering_problems(&items);
        assert!(problems.is_empty(), "{point}: {problems:?}");
        root.assert_clean(point);
    }
}

/// A send cut off before its commit point leaves its numbered entry staged; the settling that
/// frees the number is cut off in turn. Whatever it leaves, the message reaches nobody (never
/// part of its recipients) and the numbers stay gap-free. Returns what went wrong.
fn cut_off_settling(breaks: &[(&str, &str)]) -> Vec<String> {
    let send =
        |summary: &'static str| ["send", "--to", "all", "--intent", "inform", "--summary", summary];
    let root = Root::new(2);
    let first =
        root.run_env(Some("coordinator"), &send("first"), &[("CIRCE_CRASH_AT", "seq.staged")]);
    assert_eq!(first.code, 86, "{first:?}");
    let mut settle = breaks.to_vec();
    settle.push(("CIRCE_CRASH_AT", "seq.discarding"));
    let cut = root.run_env(Some("coordinator"), &send("second"), &settle);
    assert_eq!(cut.code, 86, "the settling should have been cut off: {cut:?}");
    root.run_env(Some("coordinator"), &send("third"), breaks);
    root.doctor(true);
    let mut p = Vec::new();
    let mut reached = Vec::new();
    for (n, boxes) in root.messages() {
        for b in boxes.iter().filter(|b| b.starts_with("inbox:")) {
            let inbox = root.dir.join("AGENTS").join(&b["inbox:".len()..]).join("INBOX");
            let text = std::fs::read_to_string(inbox.join(&n)).unwrap_or_default();
            if text.contains("## Summary\nfirst\n") {
                reached.push(b.clone());
            }
        }
    }
    if !reached.is_empty() {
        p.push(format!("the message never delivered reached {reached:?}"));
    }
    p.extend(numbering_problems(&numbered(&root)));
    p
}

#[test]
fn a_cut_off_settling_frees_the_number_whole() {
    let p = cut_off_settling(&[]);
    assert!(p.is_empty(), "{p:?}");
    // Removed where it lies, copy by copy, the settling leaves a part of them behind, which
    // the next one reads as delivered to the others.
    let broken = cut_off_settling(&[("CIRCE_TEST_BREAK", "seq-discard-in-place")]);
    assert!(!broken.is_empty(), "the checker should see the broken variant");
}

/// A numbered chat line commits with its append: killed after its marker was staged and
/// before the write, the number is free again; killed after the write, it stays used.
#[test]
fn a_chat_line_number_commits_with_its_append() {
    for (point, written) in [("seq.chat.staged", false), ("seq.chat.written", true)] {
        let root = Root::new(0);
        let say = ["chat", "say", "--seq", "--to", "qa", "hello"];
        let out = root.run_env(Some("coordinator"), &say, &[("CIRCE_CRASH_AT", point)]);
        assert_eq!(out.code, 86, "{point}: {out:?}");
        let (code, found) = root.doctor(false);
        assert_ne!(code, 0, "{point}: doctor must see the marker: {found:?}");
        root.ok(Some("coordinator"), &say);
        let chat = std::fs::read_to_string(root.dir.join("chat.md")).unwrap();
        let want = if written {
            "[coordinator-to-qa]: (COORDINATOR #1): hello\n[coordinator-to-qa]: (COORDINATOR #2): hello\n"
        } else {
            "[coordinator-to-qa]: (COORDINATOR #1): hello\n"
        };
        assert_eq!(chat, want, "{point}");
        root.assert_clean(point);
    }
}

/// `.owner` is written without an fsync (it is derived from `.status`), so after a power
/// cut it may be empty, cut short or gone although its rename survived. Each such leftover
/// is rebuilt by the owner's next command, and `doctor` reports it until then.
#[test]
fn unsynced_owner_is_rebuilt() {
    for (what, content) in [("empty", Some("")), ("cut short", Some("owner: engi")), ("gone", None)]
    {
        let r = Root::new(1);
        r.open("T1");
        r.ok(Some("engineer"), &["claim", "T1"]);
        let path = r.dir.join("TASKS/T1.owner");
        match content {
            Some(c) => std::fs::write(&path, c).unwrap(),
            None => std::fs::remove_file(&path).unwrap(),
        }
        let doc = r.run(None, &["doctor"]);
        assert_ne!(doc.code, 0, "{what}: doctor must report the damaged .owner: {doc:?}");
        assert!(doc.stderr.contains(".owner does not match"), "{what}: {doc:?}");
        r.ok(Some("engineer"), &["heartbeat", "T1"]);
        let text = std::fs::read_to_string(&path).unwrap();
        let own = OwnerRecord::parse(&text).unwrap_or_else(|| panic!("{what}: {text:?}"));
        assert_eq!(own.owner, "engineer", "{what}");
        assert_eq!(own.epoch, r.status("T1").unwrap().epoch, "{what}");
        assert!(r.task_problems().is_empty(), "{what}: {:?}", r.task_problems());
        r.ok(None, &["doctor"]);
    }
}
