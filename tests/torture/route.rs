//! Routing rules fire exactly once under a crash at every named step (PROTOCOLS.md section
//! 16, "Routing"): a task move's routed message rides in the task's outbox, a message's in
//! the message's own all-or-none delivery. Each run crashes the acting command at one step
//! (`CIRCE_CRASH_AT`: exit 86, no cleanup, as kill -9 there), then runs the ordinary next
//! commands (a retry of the same send; `reap`, which opens every task), then checks: exactly
//! one routed message, the act done exactly once, and a clean root after `doctor --repair`.

use crate::common::Root;

/// Routing for the scenarios: the engineer's completions go to qa, qa's approvals to the
/// engineer.
const ROUTING: &str = "routing:\n  engineer:\n    complete: {qa: Ready for testing}\n  qa:\n    approved: {engineer: Approved}\n";

/// The steps a completing task move passes (its outbox) and a message's batch delivery.
const TASK_POINTS: [&str; 7] = [
    "record.status",
    "record.owner",
    "send.staged",
    "send.delivered",
    "outbox.delivered",
    "outbox.cleared",
    "status.recorded",
];
/// A numbered message and what a rule sends with it land all or none (PROTOCOLS.md section
/// 14: they are staged in the sender's number entry).
const MESSAGE_POINTS: [&str; 3] = ["seq.staged", "seq.committed", "seq.delivered"];

/// qa's approval: a message with its own msg id (so its retry is the same send).
const APPROVAL: &str =
    "---\nto: coordinator\ntype: update\nstatus: approved\nmsg-id: ok-1\n---\nLooks good\n";

fn root() -> Root {
    let r = Root::new(1);
    let cfg = std::fs::read_to_string(r.dir.join("circe.yaml")).unwrap();
    std::fs::write(r.dir.join("circe.yaml"), format!("{cfg}{ROUTING}")).unwrap();
    r
}

/// The files in `box_dir` (relative to the root) whose text holds `needle`.
fn holding(r: &Root, box_dir: &str, needle: &str) -> usize {
    std::fs::read_dir(r.dir.join(box_dir)).map_or(0, |rd| {
        rd.flatten()
            .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains(needle)))
            .count()
    })
}

/// After the crash and the next commands: the problems seen.
/// `env` is the run's (a broken variant is broken for every command, doctor's too).
fn check(
    r: &Root,
    env: &[(&str, &str)],
    what: &str,
    routed: (&str, &str),
    act: (&str, &str),
) -> Vec<String> {
    let mut p = Vec::new();
    r.run_env(None, &["doctor", "--repair"], env);
    let after = r.run_env(None, &["doctor"], env);
    if after.code != 0 {
        p.push(format!("{what}: doctor after --repair: {}{}", after.stdout, after.stderr));
    }
    p.extend(r.task_problems().into_iter().map(|x| format!("{what}: {x}")));
    let n = holding(r, routed.0, routed.1);
    if n != 1 {
        p.push(format!("{what}: {n} routed messages in {}, want exactly 1", routed.0));
    }
    let n = holding(r, act.0, act.1);
    if n != 1 {
        p.push(format!("{what}: {n} copies of the act's message in {}, want 1", act.0));
    }
    p
}

/// One crash of a task completion at `point`; returns (reached, problems).
fn task_run(point: &str, env: &[(&str, &str)]) -> (bool, Vec<String>) {
    let r = root();
    r.open("T1");
    r.ok(Some("engineer"), &["claim", "T1"]);
    r.ok(Some("engineer"), &["status", "T1", "in_progress"]);
    r.ok(Some("engineer"), &["check", "T1", "tests_passed=true"]);
    let mut cenv = env.to_vec();
    cenv.push(("CIRCE_CRASH_AT", point));
    let o = r.run_env(Some("engineer"), &["status", "T1", "completed"], &cenv);
    let reached = o.code == 86;
    let mut p = Vec::new();
    if !reached && o.code != 0 {
        p.push(format!("task @ {point}: the completion failed: {o:?}"));
    }
    // The next ordinary commands: reap opens every task (finishing what a crash left).
    for args in [&["reap"][..], &["tasks"][..]] {
        let o = r.run_env(None, args, env);
        if o.code != 0 {
            p.push(format!("task @ {point}: {args:?} exit {}: {}", o.code, o.stderr.trim()));
        }
    }
    if r.status("T1").is_none_or(|s| s.status.as_str() != "completed") {
        p.push(format!("task @ {point}: T1 is not completed"));
    }
    let mut checked = check(
        &r,
        env,
        &format!("task @ {point}"),
        ("AGENTS/qa/INBOX", "routed-by: engineer.complete"),
        ("AGENTS/engineer/INBOX", "task_id: T1"),
    );
    p.append(&mut checked);
    (reached, p)
}

/// One crash of qa's approval at `point`, then its retry.
fn message_run(point: &str, env: &[(&str, &str)]) -> (bool, Vec<String>) {
    let r = root();
    let file = r.tmp.path().join("approval.md");
    std::fs::write(&file, APPROVAL).unwrap();
    let send = ["send", "--file", file.to_str().unwrap()];
    let mut cenv = env.to_vec();
    cenv.push(("CIRCE_CRASH_AT", point));
    let o = r.run_env(Some("qa"), &send, &cenv);
    let reached = o.code == 86;
    let mut p = Vec::new();
    // The sender tries again (the same message, the same msg id).
    let o = r.run_env(Some("qa"), &send, env);
    if o.code != 0 {
        p.push(format!("message @ {point}: the retry failed: {o:?}"));
    }
    let mut checked = check(
        &r,
        env,
        &format!("message @ {point}"),
        ("AGENTS/engineer/INBOX", "routed-by: qa.approved"),
        ("AGENTS/coordinator/INBOX", "msg-id: ok-1"),
    );
    p.append(&mut checked);
    (reached, p)
}

#[test]
fn a_routing_rule_fires_exactly_once_across_a_crash_at_every_step() {
    let t = std::time::Instant::now();
    let mut problems = Vec::new();
    for point in TASK_POINTS {
        let (hit, p) = task_run(point, &[]);
        if !hit {
            problems.push(format!("a completion no longer reaches {point}"));
        }
        problems.extend(p);
        assert!(t.elapsed().as_secs() < 90, "route crash slice over its time limit");
    }
    for point in MESSAGE_POINTS {
        let (hit, p) = message_run(point, &[]);
        if !hit {
            problems.push(format!("a routed message no longer reaches {point}"));
        }
        problems.extend(p);
    }
    // Without a crash, too.
    problems.extend(task_run("none", &[]).1);
    problems.extend(message_run("none", &[]).1);
    eprintln!(
        "route crash runs: {}, {:?}",
        TASK_POINTS.len() + MESSAGE_POINTS.len() + 2,
        t.elapsed()
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The checker catches each way to get it wrong: an outbox nobody finishes after a crash (the
/// routed message is lost), a delivery that does not look for its earlier copy (it lands
/// twice), a crashed numbered send delivered afterwards although it never committed (its
/// retry sends message and route again). The last needs the retry's look for an earlier copy
/// made before its hold (`msgid-unheld`): made under the hold, as circe does, the look comes
/// after the hold settled the crashed send, and finds it even when it was delivered.
#[test]
fn the_route_checker_catches_lost_and_doubled_messages() {
    let (_, lost) = task_run("record.owner", &[("CIRCE_TEST_BREAK", "no-outbox")]);
    assert!(lost.iter().any(|p| p.contains("0 routed messages")), "{lost:#?}");
    let (_, twice) = task_run("outbox.delivered", &[("CIRCE_TEST_BREAK", "outbox-dup")]);
    assert!(twice.iter().any(|p| p.contains("2 routed messages")), "{twice:#?}");
    let (_, retried) =
        message_run("seq.staged", &[("CIRCE_TEST_BREAK", "seq-roll-forward,msgid-unheld")]);
    assert!(retried.iter().any(|p| p.contains("2 routed messages")), "{retried:#?}");
    eprintln!("caught: {} / {} / {}", lost[0], twice[0], retried[0]);
}

/// A crash that leaves a change's messages undelivered is a violation doctor reports, and
/// `doctor --repair` alone delivers them (once) without any other command on the task.
#[test]
fn doctor_repair_alone_delivers_an_outbox_a_crash_left() {
    let r = root();
    r.open("T1");
    r.ok(Some("engineer"), &["claim", "T1"]);
    r.ok(Some("engineer"), &["status", "T1", "in_progress"]);
    r.ok(Some("engineer"), &["check", "T1", "tests_passed=true"]);
    let o = r.run_env(
        Some("engineer"),
        &["status", "T1", "completed"],
        &[("CIRCE_CRASH_AT", "record.owner")],
    );
    assert_eq!(o.code, 86, "{o:?}");
    let routed = ("AGENTS/qa/INBOX", "routed-by: engineer.complete");
    assert_eq!(holding(&r, routed.0, routed.1), 0, "delivered before the crash point");
    let (code, found) = r.doctor(false);
    assert_eq!(code, 1, "{found:?}");
    assert!(found.iter().any(|v| v.contains("not yet delivered")), "{found:?}");
    let (_, repaired) = r.doctor(true);
    assert_eq!(holding(&r, routed.0, routed.1), 1, "{repaired:?}");
    let (code, left) = r.doctor(false);
    assert_eq!(code, 0, "{left:?}");
}

/// A completion at `now` up to its routed message: the root, and the routed copy's name
/// in qa's INBOX once delivered (`crash`: the step it is cut off at).
fn complete_at(now: &str, crash: &str, plant: Option<(&str, &str)>) -> (Root, Vec<String>) {
    let r = root();
    let at = [("CIRCE_NOW", now)];
    for (who, args) in [
        ("coordinator", &crate::common::open_args("T1")[..]),
        ("engineer", &["claim", "T1"][..]),
        ("engineer", &["status", "T1", "in_progress"][..]),
        ("engineer", &["check", "T1", "tests_passed=true"][..]),
    ] {
        let o = r.run_env(Some(who), args, &at);
        assert_eq!(o.code, 0, "{args:?}: {o:?}");
    }
    if let Some((name, text)) = plant {
        std::fs::write(r.dir.join("AGENTS/qa/INBOX").join(name), text).unwrap();
    }
    let o = r.run_env(
        Some("engineer"),
        &["status", "T1", "completed"],
        &[("CIRCE_NOW", now), ("CIRCE_CRASH_AT", crash)],
    );
    assert!([0, 86].contains(&o.code), "{o:?}");
    let mut names: Vec<String> = std::fs::read_dir(r.dir.join("AGENTS/qa/INBOX"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (r, names)
}

/// A routed copy that took a numbered name (`x.2.md`, its base name held by another message)
/// before a crash, whose base name is then taken on: the outbox's retry finds the copy where
/// it lies instead of delivering it again at the freed name.
#[test]
fn a_retried_outbox_finds_its_copy_under_any_numbered_name() {
    let now = "2030-01-01T00:00:00Z";
    // Where the routed copy lands when nothing is in its way.
    let (scratch, names) = complete_at(now, "none", None);
    let [name] = &names[..] else { panic!("{names:?}") };
    // Another message under that name, then the completion cut off once its copy landed.
    let other = std::fs::read_to_string(scratch.dir.join("AGENTS/qa/INBOX").join(name)).unwrap();
    let other = other.replace("routed-by: engineer.complete", "note: in the way");
    let other = other
        .lines()
        .map(|l| if l.starts_with("msg_id:") { "msg_id: in-the-way-1" } else { l })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    let (r, names) = complete_at(now, "outbox.delivered", Some((name, &other)));
    let numbered = name.replace(".md", ".2.md");
    assert_eq!(names, vec![numbered, name.clone()], "the copy took the numbered name");
    // The message in the way is moved on by hand before anything opens the task: its name
    // is free.
    let inbox = r.dir.join("AGENTS/qa/INBOX");
    std::fs::rename(inbox.join(name), r.dir.join("AGENTS/qa/WORKSPACE").join(name)).unwrap();
    let problems = check(
        &r,
        &[],
        "retried outbox",
        ("AGENTS/qa/INBOX", "routed-by: engineer.complete"),
        ("AGENTS/engineer/INBOX", "task_id: T1"),
    );
    assert!(problems.is_empty(), "{problems:#?}");
}
