//! The task lifecycle through the CLI: claim, races, status moves, checks, leases,
//! release, parking, fencing, take/done, the board and doctor.

use serde_json::{Value, json};

use crate::common::{Env, assert_unchanged};

const T: &str = "AUTH-012";
const MSG: &str = "20251121_170000_coordinator-all_implement-feature_AUTH-012.md";
const T5: &str = "2025-11-21T17:05:00Z";

/// A root with task AUTH-012 open and a second engineer.
fn setup() -> Env {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.open_task(T);
    env
}

/// Open `task` with `priority` at `now` (coordinator -> all engineers).
fn open_at(env: &Env, now: &str, task: &str, priority: &str) {
    env.at(
        now,
        "coordinator",
        &[
            "send",
            "--to",
            "all",
            "--intent",
            "implement_feature",
            "--task",
            task,
            "--priority",
            priority,
        ],
    )
    .ok();
}

#[test]
fn claim_moves_the_message_and_writes_the_records() {
    let env = setup();
    let out = env.at(T5, "engineer", &["claim", T]);
    out.ok();
    snap!(env, out);
    assert!(env.ls("NEW_MESSAGES").is_empty());
    assert_eq!(env.ls("AGENTS/engineer/INBOX"), [MSG]);
    let r = env.record(T);
    assert_eq!(r.status.as_str(), "claimed");
    assert_eq!(r.owner.as_deref(), Some("engineer"));
    assert_eq!((r.epoch, r.attempts), (1, 1));
    assert_eq!(r.lease_expires_at.as_deref(), Some("2025-11-21T17:35:00Z"));
    let owner = env.read(&format!("TASKS/{T}.owner"));
    assert!(owner.contains("owner: engineer") && owner.contains("epoch: 1"), "{owner}");
    let ev = env.events();
    let last = ev.last().unwrap();
    assert_eq!(
        (&last["event"], &last["agent"], &last["to"]),
        (&json!("claim"), &json!("engineer"), &json!("claimed"))
    );
}

#[test]
fn claiming_again_by_the_owner_changes_nothing() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    let before = env.state();
    let again = env.at("2025-11-21T17:06:00Z", "engineer", &["claim", T, "--json"]);
    again.ok();
    let j = again.json();
    assert_eq!(j["already_held"], true);
    assert_eq!(j["epoch"], 1);
    assert_unchanged(&before, &env.state());
}

#[test]
fn the_second_claimer_loses_with_the_winners_name() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    let before = env.state();
    let lost = env.at(T5, "engineer-2", &["claim", T]);
    lost.code(4);
    assert!(lost.stderr.contains("held by engineer"), "{}", lost.show());
    snap!(env, lost);
    let j = env.at(T5, "engineer-2", &["claim", T, "--json"]);
    j.code(4);
    let j = j.json();
    assert_eq!(j["error"]["kind"], "conflict");
    assert_eq!(j["error"]["details"]["owner"], "engineer");
    assert_unchanged(&before, &env.state());
    assert!(env.ls("AGENTS/engineer-2/INBOX").is_empty());
}

#[test]
fn claim_next_takes_priority_then_age() {
    let env = Env::new();
    open_at(&env, "2025-11-21T17:00:00Z", "LOW-1", "low");
    open_at(&env, "2025-11-21T17:01:00Z", "OLD-1", "normal");
    open_at(&env, "2025-11-21T17:02:00Z", "NEW-1", "normal");
    open_at(&env, "2025-11-21T17:03:00Z", "HIGH-1", "high");
    let mut order = Vec::new();
    for _ in 0..4 {
        let o = env.at(T5, "engineer", &["claim", "--next", "--json"]);
        o.ok();
        order.push(o.json()["task_id"].as_str().unwrap().to_string());
    }
    assert_eq!(order, ["HIGH-1", "OLD-1", "NEW-1", "LOW-1"]);
    let none = env.at(T5, "engineer", &["claim", "--next"]);
    none.code(6);
    snap!(env, none);
    // Exit 6 is an answer, not an error: no `error:` line, and its own JSON.
    assert!(!none.stderr.contains("error:"), "{}", none.show());
    assert_eq!(
        env.at(T5, "engineer", &["claim", "--next", "--json"]).json()["nothing_to_claim"],
        true
    );
}

#[test]
fn claim_next_on_an_empty_queue_and_for_an_ineligible_role() {
    let env = Env::new();
    env.at(T5, "engineer", &["claim", "--next"]).code(6);
    env.open_task(T);
    let before = env.state();
    env.at(T5, "qa", &["claim", "--next"]).code(6);
    assert_unchanged(&before, &env.state());
}

#[test]
fn an_ineligible_agent_is_refused() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.as_(
        "coordinator",
        &["send", "--to", "agent:engineer", "--intent", "implement_feature", "--task", "ONLY-1"],
    )
    .ok();
    env.open_task(T);
    let before = env.state();
    // Addressed to another agent by name (`agent:NAME`).
    let o = env.at(T5, "engineer-2", &["claim", "ONLY-1"]);
    o.code(3);
    assert!(o.stderr.contains("may not take task ONLY-1"), "{}", o.show());
    // A role the registry does not let receive implement_feature.
    let o = env.at(T5, "qa", &["claim", T]);
    o.code(3);
    snap!(env, o);
    assert_unchanged(&before, &env.state());
    env.at(T5, "engineer", &["claim", "ONLY-1"]).ok();
    env.at(T5, "nobody", &["claim", T]).code(5);
    env.at(T5, "engineer", &["claim", "NOPE-9"]).code(5);
}

#[test]
fn status_moves_outside_the_table_are_refused() {
    let env = setup();
    // Not claimed yet: nobody may move it.
    let before = env.state();
    env.at(T5, "engineer", &["status", T, "in_progress"]).code(3);
    assert_unchanged(&before, &env.state());
    env.at(T5, "engineer", &["claim", T]).ok();
    let before = env.state();
    let mut refused = Vec::new();
    for target in ["completed", "blocked", "parked"] {
        let o = env.at(T5, "engineer", &["status", T, target]);
        o.code(3);
        refused.push(o);
    }
    // The status it has already: nothing to do, and no error.
    let o = env.at(T5, "engineer", &["status", T, "claimed"]);
    o.ok();
    assert!(o.stdout.contains("already claimed"), "{}", o.show());
    snap!(env, refused);
    env.at(T5, "engineer", &["status", T, "sideways"]).code(2);
    assert_unchanged(&before, &env.state());
    // The table's path does work: start, block, unblock.
    for target in ["in_progress", "blocked", "in-progress"] {
        env.at(T5, "engineer", &["status", T, target]).ok();
    }
    assert_eq!(env.record(T).status.as_str(), "in_progress");
    // Another engineer may not move it: conflict, naming the owner.
    let o = env.at(T5, "engineer-2", &["status", T, "blocked"]);
    o.code(4);
    assert!(o.stderr.contains("held by engineer"), "{}", o.show());
}

#[test]
fn completion_waits_for_the_checks() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    env.at(T5, "engineer", &["status", T, "in_progress"]).ok();
    let before = env.state();
    let o = env.at(T5, "engineer", &["status", T, "completed"]);
    o.code(3);
    assert!(o.stderr.contains("checks not passed: tests_passed"), "{}", o.show());
    snap!(env, o);
    assert_unchanged(&before, &env.state());
    env.at(T5, "engineer", &["check", T, "tests_passed=false"]).ok();
    env.at(T5, "engineer", &["status", T, "completed"]).code(3);
    let c = env.at(T5, "engineer", &["check", T, "tests_passed=true", "--json"]);
    c.ok();
    assert_eq!(c.json()["checks"], json!({"tests_passed": true}));
    assert_eq!(env.read(&format!("TASKS/{T}.checks")), "tests_passed: true\n");
    let done = env.at("2025-11-21T17:30:00Z", "engineer", &["status", T, "completed"]);
    done.ok();
    let r = env.record(T);
    assert_eq!(r.status.as_str(), "completed");
    assert_eq!(r.lease_expires_at, None);
    assert!(!env.root().join(format!("TASKS/{T}.owner")).exists(), ".owner goes with the lease");
    // Terminal: no way back.
    env.at(T5, "engineer", &["status", T, "in_progress"]).code(3);
    env.at(T5, "engineer", &["claim", T]).code(3);
}

/// A check the registry added to an intent after a task opened is one its completion
/// demands: `tasks`, `board` and `show` count it (as not passed) before any check is
/// recorded; a finished task keeps the checks it finished with.
#[test]
fn a_check_the_registry_added_since_the_task_opened_is_counted_everywhere() {
    let env = setup();
    env.complete_task("DONE-1");
    let cfg = env.circe(["config"]).run().stdout.clone();
    assert!(cfg.contains("  intents: {}"), "{cfg}");
    env.set_config(
        &cfg.replace("  intents: {}", "  intents:\n    implement_feature: {checks: [lint_clean]}"),
    );
    let rows = env.circe(["tasks", "--json"]).run().json()["tasks"].clone();
    let counts = |rows: &serde_json::Value, task: &str| {
        let r = rows.as_array().unwrap().iter().find(|r| r["task_id"] == task).unwrap().clone();
        (r["checks_passed"].clone(), r["checks_total"].clone())
    };
    assert_eq!(counts(&rows, T), (json!(0), json!(2)), "{rows}");
    assert_eq!(counts(&rows, "DONE-1"), (json!(1), json!(1)), "finished as it was: {rows}");
    let text = env.circe(["tasks"]).run();
    assert!(
        text.stdout.lines().any(|l| l.starts_with(T) && l.contains(" 0/2 ")),
        "{}",
        text.show()
    );
    let board = env.circe(["board", "--once", "--json"]).run().json()["tasks"].clone();
    assert_eq!(counts(&board, T), (json!(0), json!(2)), "{board}");
    let show = env.circe(["show", T, "--json"]).run();
    assert_eq!(show.json()["checks"], json!({"lint_clean": false, "tests_passed": false}));
    let show = env.circe(["show", T]).run();
    assert!(show.stdout.contains("lint_clean: false  (required by intent"), "{}", show.show());
    // What completion refuses is what they said.
    env.as_("engineer", &["claim", T]).ok();
    env.as_("engineer", &["status", T, "in_progress"]).ok();
    env.as_("engineer", &["check", T, "tests_passed=true"]).ok();
    let o = env.as_("engineer", &["status", T, "completed"]);
    o.code(3);
    assert!(o.stderr.contains("checks not passed: lint_clean"), "{}", o.show());
}

#[test]
fn check_run_records_the_exit_status_and_logs_the_command() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    let f = env.at(T5, "engineer", &["check", T, "--run", "tests_passed", "--", "false"]);
    f.code(3);
    assert_eq!(env.read(&format!("TASKS/{T}.checks")), "tests_passed: false\n");
    let ev = env.events();
    let last = ev.last().unwrap();
    assert_eq!(last["event"], "check");
    assert_eq!(last["command"], json!(["false"]));
    assert_eq!(last["passed"], false);
    assert_eq!(last["exit_code"], 1);
    let p = env.at(
        T5,
        "engineer",
        &["--json", "check", T, "--run", "tests_passed", "--", "sh", "-c", "echo all green"],
    );
    p.ok();
    assert!(p.stderr.contains("all green"), "the command's output goes to stderr: {}", p.show());
    assert_eq!(env.read(&format!("TASKS/{T}.checks")), "tests_passed: true\n");
    let ev = env.events();
    let last = ev.last().unwrap();
    assert_eq!(
        (&last["command"], &last["passed"], &last["how"]),
        (&json!(["sh", "-c", "echo all green"]), &json!(true), &json!("run"))
    );
    // The command's answer and its event say the same time, to the millisecond.
    assert_eq!(p.json()["seconds"], last["seconds"], "{}", p.show());
    // Not the owner: not recorded.
    let before = env.state();
    env.at(T5, "engineer-2", &["check", T, "--run", "tests_passed", "--", "true"]).code(4);
    env.at(T5, "engineer-2", &["check", T, "tests_passed=false"]).code(4);
    env.at(T5, "engineer", &["check", T, "Bad-Name=true"]).code(3);
    env.at(T5, "engineer", &["check", T, "--run", "x"]).code(3);
    env.at(T5, "engineer", &["check", T, "--run", "tests_passed"]).code(2);
    assert_unchanged(&before, &env.state());
}

/// A result written into `.checks` by hand does not complete a task the event log says is
/// unproven: a failed run flipped to true, a check no event records, a check a handoff reset.
/// Nothing changes; `show` says which; once run, the task completes.
#[test]
fn a_check_passed_by_editing_its_record_does_not_complete_the_task() {
    local_only!("edits the task's record files");
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    env.at(T5, "engineer", &["status", T, "in_progress"]).ok();
    env.at(T5, "engineer", &["check", T, "--run", "tests_passed", "--", "false"]).code(3);
    let checks = format!("TASKS/{T}.checks");
    std::fs::write(env.root().join(&checks), "tests_passed: true\n").unwrap();
    let before = env.state();
    let done = env.at(T5, "engineer", &["status", T, "completed"]);
    done.code(3);
    let said = "tests_passed: its last check event (id ";
    assert!(
        done.stderr.contains(said) && done.stderr.contains("a run that exited 1"),
        "{}",
        done.show()
    );
    assert!(done.stderr.contains(&format!("check {T} --run tests_passed")), "{}", done.show());
    assert_unchanged(&before, &env.state());
    let show = env.circe(["show", T]).run();
    assert!(show.stdout.contains("did not pass: .checks edited by hand?"), "{}", show.show());
    // A check no event records, in a log that holds the task's whole history.
    std::fs::write(env.root().join(&checks), "tests_passed: true\nreviewed: true\n").unwrap();
    let done = env.at(T5, "engineer", &["--json", "status", T, "completed"]);
    done.code(3);
    let message = done.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("reviewed: no check event records it"), "{message}");
    // Recorded by circe, both pass.
    std::fs::write(env.root().join(&checks), "tests_passed: false\n").unwrap();
    env.at(T5, "engineer", &["check", T, "--run", "tests_passed", "--", "true"]).ok();
    env.at(T5, "engineer", &["status", T, "completed"]).ok();
    assert_eq!(env.record(T).status.as_str(), "completed");
}

#[test]
fn heartbeat_extends_the_lease() {
    let env = setup();
    env.circe(["claim", T, "--ttl", "60s"]).agent("engineer").now(T5).run().ok();
    assert_eq!(env.record(T).lease_expires_at.as_deref(), Some("2025-11-21T17:06:00Z"));
    let hb = env.at("2025-11-21T17:05:30Z", "engineer", &["heartbeat", T, "--ttl", "10m"]);
    hb.ok();
    assert_eq!(hb.stdout, format!("{T} lease until 2025-11-21T17:15:30Z\n"));
    assert_eq!(env.record(T).lease_expires_at.as_deref(), Some("2025-11-21T17:15:30Z"));
    assert!(env.read(&format!("TASKS/{T}.owner")).contains("2025-11-21T17:15:30Z"));
    // Past the first lease but inside the extended one: still held.
    env.at("2025-11-21T17:10:00Z", "engineer-2", &["claim", T]).code(4);
    env.at("2025-11-21T17:10:00Z", "engineer-2", &["heartbeat", T]).code(4);
    // Never cut short: the lease runs to the later of its end and now + the ttl.
    let hb = env.at("2025-11-21T17:10:00Z", "engineer", &["heartbeat", T, "--ttl", "1m"]);
    assert_eq!(hb.stdout, format!("{T} lease until 2025-11-21T17:15:30Z\n"));
}

/// Claiming a task one holds again renews its lease as a heartbeat does when it ran out (or
/// with --ttl): the holder is never told "held" of a lease that has run out. A claim
/// within the lease and without --ttl changes nothing.
#[test]
fn claiming_ones_own_task_again_renews_a_lease_that_ran_out() {
    let env = setup();
    env.circe(["claim", T, "--ttl", "60s"]).agent("engineer").now(T5).run().ok();
    let lease = |o: &crate::common::Out| o.json()["lease_expires_at"].as_str().unwrap().to_string();
    let same = env.at("2025-11-21T17:05:30Z", "engineer", &["claim", T, "--json"]);
    assert_eq!(lease(&same), "2025-11-21T17:06:00Z", "{}", same.show());
    let late = "2025-11-21T17:08:00Z";
    let p = env.at(late, "engineer", &["prime"]);
    assert!(p.stdout.contains("it ran out; another agent may take it over"), "{}", p.show());
    let again = env.at(late, "engineer", &["claim", T, "--json"]);
    again.ok();
    assert_eq!(again.json()["already_held"], true);
    assert_eq!(lease(&again), "2025-11-21T17:38:00Z", "{}", again.show());
    let longer = env.at(late, "engineer", &["claim", T, "--ttl", "2h", "--json"]);
    assert_eq!(lease(&longer), "2025-11-21T19:08:00Z", "{}", longer.show());
    assert_eq!(longer.json()["epoch"], 1, "{}", longer.show());
    env.at("2025-11-21T18:00:00Z", "engineer-2", &["claim", T]).code(4);
}

/// A claim's long `--ttl` outlives the heartbeats that use the configured lease (30m).
#[test]
fn a_heartbeat_never_cuts_a_long_lease_short() {
    let env = setup();
    env.circe(["claim", T, "--ttl", "2h"]).agent("engineer").now(T5).run().ok();
    let hb = env.at("2025-11-21T17:10:00Z", "engineer", &["heartbeat", T]);
    assert_eq!(hb.stdout, format!("{T} lease until 2025-11-21T19:05:00Z\n"), "{}", hb.show());
    env.at("2025-11-21T18:00:00Z", "engineer-2", &["claim", T]).code(4);
    let hb = env.at("2025-11-21T19:00:00Z", "engineer", &["heartbeat", T]);
    assert_eq!(hb.stdout, format!("{T} lease until 2025-11-21T19:30:00Z\n"), "{}", hb.show());
}

#[test]
fn release_returns_the_message_and_another_agent_reclaims() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    env.at(T5, "engineer", &["take", T]).ok();
    assert_eq!(env.ls("AGENTS/engineer/WORKSPACE"), [MSG]);
    let again = env.at(T5, "engineer", &["take", T]);
    again.ok();
    assert!(again.stdout.contains("already: nothing to take"), "{}", again.show());
    let r = env.at("2025-11-21T17:10:00Z", "engineer", &["release", T, "--reason", "stuck"]);
    r.ok();
    snap!(env, r);
    assert_eq!(env.ls("NEW_MESSAGES"), [MSG]);
    assert!(env.ls("AGENTS/engineer/WORKSPACE").is_empty());
    let rec = env.record(T);
    assert_eq!((rec.status.as_str(), rec.owner.as_deref(), rec.epoch), ("new", None, 2));
    assert_eq!(rec.note.as_deref(), Some("stuck"));
    assert!(!env.root().join(format!("TASKS/{T}.owner")).exists());
    let c = env.at("2025-11-21T17:11:00Z", "engineer-2", &["claim", T, "--json"]);
    c.ok();
    let c = c.json();
    assert_eq!((c["epoch"].as_u64(), c["attempts"].as_u64()), (Some(3), Some(2)));
    assert_eq!(env.ls("AGENTS/engineer-2/INBOX"), [MSG]);
}

#[test]
fn only_the_owner_or_a_forcing_coordinator_releases() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    let before = env.state();
    let o = env.at(T5, "engineer-2", &["release", T]);
    o.code(4);
    assert!(o.stderr.contains("held by engineer"), "{}", o.show());
    let o = env.at(T5, "coordinator", &["release", T]);
    o.code(4);
    assert!(o.stderr.contains("--force"), "{}", o.show());
    // `--force` is a coordinator's: anyone else is told so (a rule, exit 3), not that only
    // the holder moves it as if the flag were not there.
    let o = env.at(T5, "engineer-2", &["release", T, "--force"]);
    o.code(3);
    assert!(o.stderr.contains("`--force` is for a coordinator"), "{}", o.show());
    assert!(o.stderr.contains("--intent request_help"), "{}", o.show());
    assert_unchanged(&before, &env.state());
    let f = env.at(T5, "coordinator", &["release", T, "--force", "--reason", "reassigning"]);
    f.ok();
    assert_eq!(env.record(T).status.as_str(), "new");
    assert_eq!(env.ls("NEW_MESSAGES"), [MSG]);
    let last = env.events().pop().unwrap();
    assert_eq!(
        (&last["event"], &last["forced"], &last["owner"]),
        (&json!("release"), &json!(true), &json!("engineer"))
    );
}

#[test]
fn an_expired_lease_is_taken_over_and_the_stale_owner_fenced_out() {
    let env = setup();
    env.circe(["claim", T, "--ttl", "60s"]).agent("engineer").now(T5).run().ok();
    env.at(T5, "engineer", &["status", T, "in_progress"]).ok();
    // One minute later plus one: the lease has run out.
    let t2 = "2025-11-21T17:07:00Z";
    let o = env.at(t2, "engineer-2", &["claim", T]);
    o.ok();
    assert!(o.stdout.contains("taken over from engineer"), "{}", o.show());
    snap!(env, o);
    let r = env.record(T);
    assert_eq!(r.owner.as_deref(), Some("engineer-2"));
    assert_eq!((r.epoch, r.attempts), (3, 2), "expire and claim each bump the epoch");
    assert_eq!(env.ls("AGENTS/engineer-2/INBOX"), [MSG]);
    assert!(env.ls("AGENTS/engineer/INBOX").is_empty());
    let evs: Vec<String> =
        env.events().iter().map(|e| e["event"].as_str().unwrap().to_string()).collect();
    assert!(evs.ends_with(&["expire".to_string(), "claim".to_string()]), "{evs:?}");
    // The old owner's writes are refused: by owner, and by epoch when it passes one.
    let before = env.state();
    let s = env.at(t2, "engineer", &["status", T, "completed"]);
    s.code(4);
    let s =
        env.circe(["status", T, "blocked"]).agent("engineer").now(t2).var("CIRCE_EPOCH", "1").run();
    s.code(4);
    assert!(s.stderr.contains("stale epoch 1"), "{}", s.show());
    env.at(t2, "engineer", &["heartbeat", T, "--epoch", "1"]).code(4);
    env.at(t2, "engineer", &["check", T, "tests_passed=true", "--epoch", "1"]).code(4);
    env.at(t2, "engineer", &["release", T, "--epoch", "1"]).code(4);
    assert_unchanged(&before, &env.state());
    // The new owner with the right epoch goes on.
    env.at(t2, "engineer-2", &["heartbeat", T, "--epoch", "3"]).ok();
    let s = env.at(t2, "engineer-2", &["status", T, "in_progress", "--epoch", "2", "--json"]);
    s.code(4);
    let err = &s.json()["error"];
    assert!(err["hint"].as_str().unwrap().contains("you hold it at epoch 3"), "{}", s.show());
    assert_eq!(
        (&err["details"]["epoch"], &err["details"]["owner"]),
        (&json!(3), &json!("engineer-2"))
    );
    assert!(
        env.at(t2, "engineer", &["release", T, "--epoch", "1"])
            .stderr
            .contains("another agent took")
    );
}

/// A takeover's events name only files that are there after them: the ticket went from the
/// old owner's box straight into the claimer's INBOX, so the `expire` names it there (as the
/// `claim` does), never in NEW_MESSAGES; the text line names the owner who lost it.
#[test]
fn a_takeovers_expire_names_the_file_where_the_ticket_went() {
    let env = setup();
    env.circe(["claim", T, "--ttl", "60s"]).agent("engineer").now(T5).run().ok();
    env.at("2025-11-21T17:07:00Z", "engineer-2", &["claim", T]).ok();
    let evs = env.events();
    let expire = evs.iter().find(|e| e["event"] == "expire").expect("an expire event");
    assert_eq!(expire["files"], json!([{"box": "inbox:engineer-2", "file": MSG}]), "{expire}");
    assert!(env.ls("NEW_MESSAGES").is_empty());
    assert_eq!(env.ls("AGENTS/engineer-2/INBOX"), [MSG]);
    let o = env.circe(["log", "--all", "--kind", "expire"]).run();
    o.ok();
    assert!(o.stdout.contains("by engineer-2 (epoch 2, owner engineer)"), "{}", o.show());
    assert!(o.stdout.contains(&format!("inbox:engineer-2/{MSG}")), "{}", o.show());
}

/// `log`'s text line keeps what a release, a block and a failure say (their reason or
/// note), on the event's one line, cut when long.
#[test]
fn log_lines_say_the_reason_and_the_note() {
    let env = setup();
    env.as_("engineer", &["claim", T]).ok();
    env.as_("engineer", &["release", T, "--reason", "wrong team\nfor this"]).ok();
    env.as_("engineer-2", &["claim", T]).ok();
    env.as_("engineer-2", &["status", T, "in_progress"]).ok();
    env.as_("engineer-2", &["status", T, "blocked", "--note", "waiting for the schema"]).ok();
    env.as_("engineer-2", &["status", T, "in_progress"]).ok();
    let long = format!("flaky {}", "x".repeat(300));
    env.as_("engineer-2", &["status", T, "failed", "--note", &long]).ok();
    let o = env.circe(["log", "--all", "--task", T]).run();
    o.ok();
    let line = |kind: &str| {
        o.stdout
            .lines()
            .find(|l| l.split(' ').nth(2) == Some(kind))
            .unwrap_or_else(|| panic!("no {kind} line: {}", o.stdout))
            .to_string()
    };
    assert!(line("release").ends_with(": wrong team for this"), "{}", o.stdout);
    assert!(line("block").ends_with(": waiting for the schema"), "{}", o.stdout);
    let fail = line("fail");
    assert!(fail.contains(": flaky xxx") && fail.ends_with('…'), "{fail}");
    assert!(fail.chars().count() < 250, "cut short: {fail}");
}

#[test]
fn a_task_whose_lease_keeps_running_out_is_parked_and_escalated() {
    let env = setup();
    let times = ["2025-11-21T17:10:00Z", "2025-11-21T17:20:00Z", "2025-11-21T17:30:00Z"];
    for (i, t) in times.iter().enumerate() {
        let who = if i % 2 == 0 { "engineer" } else { "engineer-2" };
        env.circe(["claim", T, "--ttl", "60s"]).agent(who).now(t).run().ok();
    }
    assert_eq!(env.record(T).attempts, 3);
    let before_inbox = env.ls("AGENTS/coordinator/INBOX");
    assert!(before_inbox.is_empty());
    let o = env.at("2025-11-21T17:40:00Z", "engineer-2", &["claim", T]);
    o.code(3);
    assert!(o.stderr.contains("parked"), "{}", o.show());
    snap!(env, o);
    let r = env.record(T);
    assert_eq!((r.status.as_str(), r.owner.as_deref()), ("parked", None));
    assert_eq!(env.ls("NEW_MESSAGES"), [MSG]);
    let inbox = env.ls("AGENTS/coordinator/INBOX");
    assert_eq!(inbox.len(), 1, "{inbox:?}");
    assert!(inbox[0].contains("_escalate_AUTH-012"), "{inbox:?}");
    let text = env.read(&format!("AGENTS/coordinator/INBOX/{}", inbox[0]));
    assert!(text.contains("intent: escalate") && text.contains("lease ran out 3 times"), "{text}");
    // From circe itself (not whichever agent's claim noticed), and the humans hear of it too.
    assert!(text.contains("from: circe\n"), "{text}");
    assert!(text.contains("`circe release --force AUTH-012`"), "{text}");
    let asked =
        |when: &str| env.at(when, "coordinator", &["questions"]).stdout.contains("circe asks you");
    assert!(asked("2025-11-21T17:40:30Z"), "the escalation is no open question");
    let human = env.ls("AGENTS/rooster/INBOX");
    assert_eq!(human, inbox, "the rooster gets the same escalation");
    // Parked: nobody claims it, not even with --next; the coordinator requeues it.
    env.at("2025-11-21T17:41:00Z", "engineer", &["claim", T]).code(3);
    env.at("2025-11-21T17:41:00Z", "engineer", &["claim", "--next"]).code(6);
    env.at("2025-11-21T17:41:00Z", "engineer", &["release", T]).code(3);
    let o = env.at("2025-11-21T17:41:00Z", "engineer", &["release", T, "--force"]);
    o.code(3);
    assert!(o.stderr.contains("`--force` is for a coordinator"), "{}", o.show());
    // A coordinator is told the flag it left out, not that only a coordinator may.
    let o = env.at("2025-11-21T17:42:00Z", "coordinator", &["release", T]);
    o.code(3);
    assert!(o.stderr.contains("a coordinator requeues it with --force"), "{}", o.show());
    assert!(
        o.stderr.contains("circe --agent coordinator release AUTH-012 --force"),
        "{}",
        o.show()
    );
    let why = ["release", T, "--force", "--reason", "flaky runner, fixed"];
    env.at("2025-11-21T17:42:00Z", "coordinator", &why).ok();
    let r = env.record(T);
    assert_eq!((r.status.as_str(), r.attempts), ("new", 0));
    // The requeue logs who forced it and why; the next claimer is told the reason.
    let log = env.circe(["log", "--task", T, "--kind", "requeue", "--json"]).run();
    let ev: serde_json::Value = serde_json::from_str(log.ok().stdout.trim()).unwrap();
    assert_eq!(
        (&ev["reason"], &ev["forced"]),
        (&serde_json::json!("flaky runner, fixed"), &serde_json::json!(true)),
        "{ev}"
    );
    // Requeued: the escalation waits for no answer any more.
    assert!(!asked("2025-11-21T17:42:30Z"), "the escalation stays open once requeued");
    let c = env.at("2025-11-21T17:43:00Z", "engineer", &["claim", "--next", "--json"]);
    assert_eq!(c.ok().json()["note"], "flaky runner, fixed", "{}", c.show());
}

/// When no task waits, `claim --next` takes over a task another agent holds whose lease ran
/// out (as `claim TASK` would), the best first; a waiting task goes before it, a lease still
/// running or an agent the task is not for leaves it held, and its own holder gets nothing.
#[test]
fn claim_next_takes_over_a_task_whose_lease_ran_out_once_none_waits() {
    const LONG: &str = "AUTH-020";
    const WAITING: &str = "AUTH-030";
    let env = setup();
    open_at(&env, T5, LONG, "high");
    env.circe(["claim", T, "--ttl", "60s"]).agent("engineer").now(T5).run().ok();
    env.circe(["claim", LONG, "--ttl", "10m"]).agent("engineer").now(T5).run().ok();
    open_at(&env, T5, WAITING, "low");
    let t7 = "2025-11-21T17:07:00Z";
    // A waiting task first, low as it is.
    let o = env.at(t7, "engineer-2", &["claim", "--next", "--json"]);
    o.ok();
    assert_eq!(o.json()["task_id"], WAITING, "{}", o.show());
    // Then the task whose lease ran out: a look changes nothing; the claim takes it over.
    let before = env.state();
    env.at(t7, "engineer", &["claim", "--next"]).code(6);
    env.at(t7, "qa", &["claim", "--next"]).code(6);
    let look = env.at(t7, "engineer-2", &["claim", "--next", "--dry-run", "--json"]);
    look.ok();
    assert_eq!((&look.json()["task_id"], &look.json()["dry_run"]), (&json!(T), &json!(true)));
    assert_unchanged(&before, &env.state());
    let o = env.at(t7, "engineer-2", &["claim", "--next", "--json"]);
    o.ok();
    let j = o.json();
    assert_eq!(
        (&j["task_id"], &j["owner"], &j["epoch"], &j["expired_owner"]),
        (&json!(T), &json!("engineer-2"), &json!(3), &json!("engineer")),
        "{}",
        o.show()
    );
    let r = env.record(T);
    assert_eq!((r.expiries, r.attempts), (1, 2));
    assert_eq!(env.ls("AGENTS/engineer-2/INBOX").len(), 2);
    env.at(t7, "engineer", &["heartbeat", T]).code(4);
    // The other's lease runs until 17:15: held until then, taken over after.
    let o = env.at(t7, "engineer-2", &["claim", "--next"]);
    o.code(6);
    assert!(o.stdout.contains("nor one whose lease ran out"), "{}", o.show());
    let o = env.at("2025-11-21T17:16:00Z", "engineer-2", &["claim", "--next", "--json"]);
    o.ok();
    assert_eq!((&o.json()["task_id"], &o.json()["epoch"]), (&json!(LONG), &json!(3)));
}

/// A record says the format it needs (`v: 3` with a deadline, section 7) on every engine:
/// in its file, and in every command's JSON.
#[test]
fn a_record_with_a_deadline_says_format_3_in_json() {
    let env = Env::new();
    let draft = env.path().join("due.md");
    let text = "# MESSAGE\nto: all\nintent: implement_feature\ntask_id: DUE-1\n\
                deadline: 2030-01-01T00:00:00Z\n\n## Summary\ndue\n";
    std::fs::write(&draft, text).unwrap();
    let o = env.as_("coordinator", &["send", "--file", draft.to_str().unwrap(), "--json"]);
    o.ok();
    assert_eq!(o.json()["task"]["v"], 3, "{}", o.show());
    let c = env.at(T5, "engineer", &["claim", "DUE-1", "--json"]);
    c.ok();
    let r = env.at(T5, "engineer", &["release", "DUE-1", "--reason", "x", "--json"]);
    r.ok();
    assert_eq!(r.json()["task"]["v"], 3, "{}", r.show());
    let s = env.at(T5, "engineer", &["show", "DUE-1", "--json"]);
    assert_eq!(s.json()["task"]["v"], 3, "{}", s.show());
}

/// A `claim --next` cut off after its records and before its events: the claimer's retry
/// finishes it and answers that the task is the claimer's already (not exit 6), and doctor
/// is clean after.
#[test]
fn a_claim_next_cut_off_before_its_events_is_told_to_its_retry() {
    local_only!("crash points of the local engine");
    let env = setup();
    let cut = env
        .circe(["claim", "--next"])
        .agent("engineer")
        .var("CIRCE_CRASH_AT", "claim.recorded")
        .run();
    cut.code(86);
    assert_ne!(env.circe(["doctor"]).run().code, 0, "the cut-off change is seen");
    let again = env.at(T5, "engineer", &["claim", "--next", "--json"]);
    again.ok();
    assert_eq!(
        (&again.json()["task_id"], &again.json()["already_held"]),
        (&json!(T), &json!(true)),
        "{}",
        again.show()
    );
    env.circe(["doctor"]).run().ok();
    let claims = env.events().iter().filter(|e| e["event"] == "claim").count();
    assert_eq!(claims, 1, "the cut-off claim's event, logged once");
}

/// `inbox` counts the tasks others hold whose lease ran out that the agent may take over.
#[test]
fn inbox_counts_the_tasks_it_may_take_over() {
    let env = setup();
    env.circe(["claim", T, "--ttl", "60s"]).agent("engineer").now(T5).run().ok();
    let t7 = "2025-11-21T17:07:00Z";
    let j = env.at(t7, "engineer-2", &["inbox", "--json"]).json();
    assert_eq!((&j["claimable"]["count"], &j["claimable"]["lapsed"]), (&json!(0), &json!(1)));
    let o = env.at(t7, "engineer-2", &["inbox"]);
    assert!(o.stdout.contains("1 task held by others whose lease ran out: take one over with circe --agent engineer-2 claim --next"), "{}", o.show());
    // Not for its own holder, nor before the lease ran out.
    assert_eq!(env.at(t7, "engineer", &["inbox", "--json"]).json()["claimable"]["lapsed"], 0);
    assert_eq!(env.at(T5, "engineer-2", &["inbox", "--json"]).json()["claimable"]["lapsed"], 0);
}

/// A root whose first expired lease parks a task, with task T claimed at T5 for 60 s.
fn claimed_to_park() -> Env {
    let env = Env::new();
    let cfg = env.read("circe.yaml").replace("max_attempts: 3", "max_attempts: 1");
    env.set_config(&cfg);
    env.open_task(T);
    env.circe(["claim", T, "--ttl", "60s"]).agent("engineer").now(T5).run().ok();
    env
}

#[test]
fn max_attempts_comes_from_the_config_and_reap_parks_too() {
    let env = claimed_to_park();
    let nothing = env.circe(["reap"]).now("2025-11-21T17:05:30Z").run();
    nothing.ok();
    assert_eq!(nothing.stdout, "no expired leases or deadlines\n");
    let reaped = env.circe(["reap", "--json"]).now("2025-11-21T17:07:00Z").run();
    reaped.ok();
    assert_eq!(
        reaped.json(),
        json!({"reaped": [{"task_id": T, "status": "parked"}], "asks_expired": [], "messages_filed": []})
    );
    assert_eq!(env.ls("NEW_MESSAGES"), [MSG]);
    assert_eq!(env.ls("AGENTS/coordinator/INBOX").len(), 1);
}

/// A reap that parks a task, cut off right after its commit: the escalation went with the
/// change (in its outbox), so it is there, once, on either engine; repair sends no other.
#[test]
fn a_park_cut_off_after_its_commit_has_sent_its_escalation_once() {
    let env = claimed_to_park();
    let later = "2025-11-21T17:07:00Z";
    env.circe(["reap"]).now(later).var("CIRCE_CRASH_AT", "reap.committed").run().code(86);
    assert_eq!(env.record(T).status.as_str(), "parked");
    let told = || {
        let inbox = env.ls("AGENTS/coordinator/INBOX");
        let notified = env.events().into_iter().filter(|e| e["event"] == "notify").count();
        (inbox.len(), notified)
    };
    assert_eq!(told(), (1, 1));
    env.circe(["doctor", "--repair"]).now(later).run().ok();
    assert_eq!(told(), (1, 1));
    env.circe(["doctor"]).now(later).run().ok();
}

/// A lapse (a deadline passed) cut off between its ticket's move into LOGS and its records:
/// the next command writes the records the lapse wrote, and its notice goes once.
#[test]
fn a_lapse_cut_off_after_its_rename_is_finished_as_a_lapse() {
    local_only!("a crash point between a rename and its records");
    let env = Env::new();
    env.open_task_due("DL-1", "all", "2030-01-01T00:00:00Z");
    env.circe(["claim", "DL-1"]).agent("engineer").now("2029-12-31T00:00:00Z").run().ok();
    let later = "2030-01-02T00:00:00Z";
    env.circe(["reap"]).now(later).var("CIRCE_CRASH_AT", "lapse.renamed").run().code(86);
    env.circe(["doctor", "--repair"]).now(later).run().ok();
    let r = env.record("DL-1");
    assert_eq!((r.status.as_str(), r.owner.as_deref()), ("expired", Some("engineer")));
    // The ticket went into LOGS; the holder's INBOX holds the notice of the lapse, once.
    let held = env.ls("AGENTS/engineer/INBOX");
    assert_eq!(held, ["20300102_000000_circe-coordinator_status-update_DL-1.md"]);
    assert_eq!(env.ls("LOGS").len(), 1);
    let told = env.ls("AGENTS/coordinator/INBOX");
    assert_eq!(told.len(), 1, "{told:?}");
    let notice = env.read(&format!("AGENTS/coordinator/INBOX/{}", told[0]));
    assert!(notice.contains("task DL-1 expired: its deadline"), "{notice}");
    let lapses = env.events().into_iter().filter(|e| e["event"] == "lapse").count();
    assert_eq!(lapses, 1);
    env.circe(["doctor"]).now(later).run().ok();
}

/// An edit of a kept record, for the test below.
type Edit = fn(&str) -> String;

/// A journal kept by a park cut off after its rename, edited by hand: a kept record that is
/// no record, or that does not fit where the ticket lies, is not written. The task falls
/// back to what its ticket's place says (a release), and no error blames its intact `.status`.
#[test]
fn a_kept_record_that_does_not_fit_is_not_rolled_forward() {
    local_only!("edits a task's lock file by hand");
    let edits: [(&str, Edit); 2] = [
        ("garbage", |_| "this: [is not: a record".to_string()),
        ("held by qa", |r| r.replace("status: parked", "status: claimed\nowner: qa")),
    ];
    for (what, edit) in edits {
        let env = claimed_to_park();
        let later = "2025-11-21T17:07:00Z";
        env.circe(["reap"]).now(later).var("CIRCE_CRASH_AT", "park.renamed").run().code(86);
        let lock = env.root().join(format!("locks/task-{T}.lock"));
        let bytes = std::fs::read(&lock).unwrap();
        let line = bytes[1..].split(|&b| b == b'\n').next().unwrap();
        let mut j: serde_json::Value = serde_json::from_slice(line).unwrap();
        let kept = j["rolls"]["record"].as_str().expect("a park keeps its record").to_string();
        j["rolls"]["record"] = json!(edit(&kept));
        std::fs::write(&lock, format!("J{j}\n")).unwrap();
        let o = env.circe(["doctor", "--repair"]).now(later).run();
        assert_eq!(o.code, 0, "{what}: {}", o.show());
        assert!(!o.stderr.contains("damaged"), "{what}: {}", o.show());
        let r = env.record(T);
        assert_eq!((r.status.as_str(), r.owner.as_deref()), ("new", None), "{what}");
        env.circe(["doctor"]).now(later).run().ok();
    }
}

#[test]
fn reap_returns_an_expired_task_to_the_queue() {
    let env = setup();
    env.circe(["claim", T, "--ttl", "60s"]).agent("engineer").now(T5).run().ok();
    env.at(T5, "engineer", &["take", T]).ok();
    let o = env.circe(["reap"]).now("2025-11-21T17:07:00Z").run();
    o.ok();
    assert_eq!(o.stdout, format!("{T}: lease ran out -> new\n"));
    assert_eq!(env.ls("NEW_MESSAGES"), [MSG]);
    assert!(env.ls("AGENTS/engineer/WORKSPACE").is_empty());
    let r = env.record(T);
    assert_eq!((r.status.as_str(), r.epoch, r.attempts), ("new", 2, 1));
    env.at("2025-11-21T17:08:00Z", "engineer-2", &["claim", "--next"]).ok();
}

#[test]
fn take_and_done_move_messages_along() {
    let env = Env::new();
    let sent = env.as_(
        "engineer",
        &["send", "--to", "qa", "--intent", "inform", "--summary", "fyi", "--json"],
    );
    sent.ok();
    let file = sent.json()["delivered"][0]["file"].as_str().unwrap().to_string();
    let t = env.as_("qa", &["take", &file]);
    t.ok();
    assert_eq!(t.stdout, format!("{file} -> workspace:qa\n"));
    assert!(env.ls("AGENTS/qa/INBOX").is_empty());
    assert_eq!(env.ls("AGENTS/qa/WORKSPACE"), std::slice::from_ref(&file));
    assert!(env.as_("qa", &["take", &file]).ok().stdout.contains("already"));
    env.as_("engineer", &["done", &file]).code(5);
    let d = env.as_("qa", &["done", &file, "--json"]);
    d.ok();
    assert_eq!(d.json(), json!({"moved": [{"box": "logs", "file": file}], "already": false}));
    assert_eq!(env.ls("LOGS"), std::slice::from_ref(&file));
    assert!(env.ls("AGENTS/qa/WORKSPACE").is_empty());
    // Run again: it is filed already, nothing moves (a retry is not an error).
    let again = env.as_("qa", &["done", &file, "--json"]);
    again.ok();
    assert_eq!(again.json(), json!({"moved": [], "already": true}));
    // Not for an agent it never concerned: that is no message of its.
    env.as_("scribe", &["done", &file]).code(5);
    env.as_("qa", &["done", "no-such-message.md"]).code(5);
}

#[test]
fn done_keeps_a_live_tasks_message() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    env.at(T5, "engineer", &["take", T]).ok();
    let before = env.state();
    let o = env.at(T5, "engineer", &["done", T]);
    o.code(3);
    snap!(env, o);
    env.at(T5, "engineer", &["done", MSG]).code(3);
    assert_unchanged(&before, &env.state());
    // Someone else cannot take it.
    env.at(T5, "engineer-2", &["take", T]).code(4);
    // Completed: now it may go.
    env.at(T5, "engineer", &["status", T, "in_progress"]).ok();
    env.at(T5, "engineer", &["check", T, "tests_passed=true"]).ok();
    env.at(T5, "engineer", &["status", T, "completed"]).ok();
    env.at(T5, "engineer", &["done", T]).ok();
    assert_eq!(env.ls("LOGS"), [MSG]);
    let again = env.at(T5, "engineer", &["done", T]);
    again.ok();
    assert!(again.stdout.contains("in LOGS already"), "{}", again.show());
    assert_eq!(env.ls("LOGS"), [MSG]);
    env.circe(["doctor"]).run().ok();
}

#[test]
fn handoff_sends_the_task_on_with_a_new_message() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    // Only the owner can hand it on.
    env.at(T5, "engineer-2", &["send", "--to", "qa", "--intent", "test", "--task", T]).code(4);
    let h = env.at(
        "2025-11-21T18:00:00Z",
        "engineer",
        &["send", "--to", "qa", "--intent", "test", "--task", T],
    );
    h.ok();
    assert!(h.stdout.contains("handed on by engineer"), "{}", h.show());
    // `show` says the handoff reset the check, not that its last recorder set it false.
    let shown = env.circe(["show", T]).run();
    assert!(
        shown.stdout.contains(
            "tests_passed: false  (reset by the handoff by engineer at 2025-11-21T18:00:00"
        ),
        "{}",
        shown.show()
    );
    let r = env.record(T);
    assert_eq!(
        (r.status.as_str(), r.intent.as_str(), r.to.as_str(), r.epoch),
        ("new", "test", "qa", 2)
    );
    assert_eq!(env.ls("NEW_MESSAGES"), ["20251121_180000_engineer-qa_test_AUTH-012.md"]);
    let last = env.events().pop().unwrap();
    assert_eq!(
        (&last["event"], &last["to"], &last["addressed_to"], &last["epoch"]),
        (&json!("handoff"), &json!("new"), &json!("qa"), &json!(2))
    );
    env.at("2025-11-21T18:05:00Z", "engineer-2", &["claim", T]).code(3);
    env.at("2025-11-21T18:05:00Z", "qa", &["claim", "--next"]).ok();
    // A task id that exists and waits cannot be opened again.
    env.open_task("T-2");
    env.as_(
        "coordinator",
        &["send", "--to", "all", "--intent", "implement_feature", "--task", "T-2"],
    )
    .code(4);
}

/// A message of a task that sets no priority shows the task's in `inbox` (text and JSON),
/// as the board and the claimable list do: a handoff without `--priority` keeps the task's.
#[test]
fn inbox_shows_a_handed_on_tasks_priority() {
    let env = Env::new();
    open_at(&env, T5, "HI-1", "high");
    env.at(T5, "engineer", &["claim", "HI-1"]).ok();
    env.at(T5, "engineer", &["send", "--to", "qa", "--intent", "test", "--task", "HI-1"]).ok();
    env.at(T5, "qa", &["claim", "HI-1"]).ok();
    let o = env.at(T5, "qa", &["inbox", "--json"]);
    let m = &o.json()["messages"][0];
    assert_eq!((&m["task_id"], &m["priority"]), (&json!("HI-1"), &json!("high")), "{}", o.show());
    let o = env.at(T5, "qa", &["inbox"]);
    let row = o.stdout.lines().find(|l| l.contains("HI-1")).unwrap_or_default().to_string();
    assert!(row.contains(" high "), "{}", o.show());
    // A message that sets its own keeps it; one of no task shows `-`.
    env.at(T5, "coordinator", &["send", "--to", "qa", "--intent", "inform", "--summary", "fyi"])
        .ok();
    let o = env.at(T5, "qa", &["inbox", "--json"]);
    let fyi =
        o.json()["messages"].as_array().unwrap().iter().find(|m| m["intent"] == "inform").cloned();
    assert_eq!(fyi.unwrap()["priority"], json!(null), "{}", o.show());
}

/// Each message without a priority of its own shows its own task's, wherever it is listed:
/// tickets of a high and a low task (one in the WORKSPACE), a message of a task that is
/// stale, and one naming a task that is not on the board (none: `-`).
#[test]
fn inbox_shows_each_message_its_own_tasks_priority() {
    let env = Env::new();
    for (t, p) in [("HI-1", "high"), ("LO-1", "low")] {
        open_at(&env, T5, t, p);
        env.at(T5, "engineer", &["claim", t]).ok();
        env.at(T5, "engineer", &["send", "--to", "qa", "--intent", "test", "--task", t]).ok();
        env.at(T5, "qa", &["claim", t]).ok();
    }
    env.at(T5, "qa", &["take", "LO-1"]).ok();
    // Two messages of HI-1 from the coordinator: taking the second makes the first stale.
    for id in ["m-1", "m-2"] {
        let inform = ["send", "--to", "agent:qa", "--intent", "inform", "--task", "HI-1"];
        env.at(T5, "coordinator", &[&inform[..], &["--summary", id, "--msg-id", id]].concat()).ok();
    }
    env.at(T5, "qa", &["take", "m-2"]).ok();
    let inform = ["send", "--to", "agent:qa", "--intent", "inform", "--task", "NONE-1"];
    env.at(T5, "coordinator", &[&inform[..], &["--summary", "gone", "--msg-id", "m-3"]].concat())
        .ok();
    let o = env.at(T5, "qa", &["inbox", "--workspace", "--json"]);
    o.ok();
    let j = o.json();
    // (task, priority) of each message listed under `key`, sorted; and the msg ids.
    let rows = |key: &str| -> (Vec<(String, Value)>, Vec<String>) {
        let list = j[key].as_array().unwrap();
        let mut rows: Vec<(String, Value)> = list
            .iter()
            .map(|m| (m["task_id"].as_str().unwrap_or("-").to_string(), m["priority"].clone()))
            .collect();
        rows.sort_by_key(|(t, p)| (t.clone(), p.to_string()));
        let ids = list.iter().map(|m| m["msg_id"].as_str().unwrap_or("-").to_string()).collect();
        (rows, ids)
    };
    let (fresh, _) = rows("messages");
    let task = |t: &str, p: Value| (t.to_string(), p);
    assert_eq!(
        fresh,
        [
            task("HI-1", json!("high")),
            task("HI-1", json!("high")),
            task("LO-1", json!("low")),
            task("NONE-1", json!(null)),
        ],
        "{}",
        o.show()
    );
    assert_eq!(
        rows("stale"),
        (vec![task("HI-1", json!("high"))], vec!["m-1".into()]),
        "{}",
        o.show()
    );
    let o = env.at(T5, "qa", &["inbox", "--workspace"]);
    let pri = |needle: &str| -> Vec<String> {
        o.stdout
            .lines()
            .filter(|l| l.contains(needle))
            .map(|l| l.split_whitespace().nth(5).unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(pri("LO-1"), ["low"], "{}", o.show());
    assert_eq!(pri("NONE-1"), ["-"], "{}", o.show());
}

#[test]
fn the_board_and_its_filters() {
    let env = setup();
    open_at(&env, "2025-11-21T17:01:00Z", "OTHER-1", "high");
    env.circe(["claim", T, "--ttl", "10m"]).agent("engineer").now(T5).run().ok();
    let all = env.circe(["tasks"]).now("2025-11-21T17:07:00Z").run();
    all.ok();
    snap!(env, all);
    let only = |args: &[&str]| -> Vec<String> {
        let o = env.circe([&["tasks", "--json"], args].concat()).run();
        o.ok();
        o.json()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["task_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(only(&[]), [T, "OTHER-1"]);
    assert_eq!(only(&["--status", "new"]), ["OTHER-1"]);
    assert_eq!(only(&["--status", "claimed"]), [T]);
    assert_eq!(only(&["--owner", "engineer"]), [T]);
    assert!(only(&["--owner", "qa"]).is_empty());
    env.circe(["tasks", "--status", "sideways"]).run().code(2);
    // Past its lease the board says so.
    let late = env.circe(["tasks", "--status", "claimed"]).now("2025-11-21T17:20:00Z").run();
    late.ok();
    assert!(late.stdout.contains("expired"), "{}", late.show());
}

#[test]
fn doctor_is_happy_on_a_healthy_root() {
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    let d = env.circe(["doctor"]).run();
    d.ok();
    assert_eq!(d.stdout, "ok: 0 repaired, 0 violations\n");
    let j = env.circe(["doctor", "--json"]).run();
    j.ok();
    assert_eq!(j.json()["open"], 0);
}

/// `--json` gives one JSON document on stdout for every command, success or failure; the
/// commands that print as they go give one JSON object per line and nothing else.
#[test]
fn json_lines_for_demo_and_replay() {
    let env = Env::new();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/release-reclaim");
    for args in [vec!["demo"], vec!["replay", fixture.to_str().unwrap()]] {
        let o = env.circe([&["--json"][..], &args].concat()).run();
        o.code(0);
        let lines: Vec<serde_json::Value> = o
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect();
        assert!(lines.len() > 5, "{}", o.show());
        assert!(lines.iter().any(|v| v["step"] == 1), "{}", o.show());
        let last = lines.last().unwrap();
        assert!(
            last["step_count"].as_u64().unwrap() > 3 && last["failed_count"].is_u64(),
            "{last}"
        );
    }
}

/// `--json` gives one JSON document on stdout for every command, success or failure.
#[test]
fn json_everywhere() {
    let env = Env::new();
    let draft = env.path().join("d.md");
    std::fs::write(&draft, "# MESSAGE\nto: qa\nintent: inform\n\nhi\n").unwrap();
    let d = draft.to_str().unwrap();
    let steps: &[(Option<&str>, &[&str], i32)] = &[
        (None, &["init"], 0),
        (None, &["agent", "add", "engineer-2", "--role", "engineer"], 0),
        (None, &["agent", "list"], 0),
        (None, &["registry"], 0),
        (None, &["send", "--template", "fix_bug"], 0),
        (
            Some("coordinator"),
            &["send", "--to", "all", "--intent", "implement_feature", "--task", T],
            0,
        ),
        (Some("engineer"), &["send", "--file", d], 0),
        (Some("qa"), &["inbox", "--workspace"], 0),
        (None, &["validate", d, "--draft"], 0),
        (None, &["validate", d], 3),
        (Some("engineer"), &["claim", T], 0),
        (Some("engineer-2"), &["claim", T], 4),
        (Some("engineer-2"), &["claim", "--next"], 6),
        (Some("engineer"), &["status", T, "in_progress"], 0),
        (Some("engineer"), &["heartbeat", T], 0),
        (Some("engineer"), &["take", T], 0),
        (Some("engineer"), &["check", T, "tests_passed=true"], 0),
        (Some("engineer"), &["check", T, "--run", "lint", "--", "true"], 3),
        (Some("engineer"), &["show", T], 0),
        (None, &["tasks"], 0),
        (Some("engineer"), &["release", T], 0),
        (None, &["reap"], 0),
        (None, &["doctor"], 0),
        (Some("engineer"), &["done", T], 5),
        (Some("nobody"), &["inbox"], 5),
        (None, &["tasks", "--status", "x"], 2),
        (None, &["no-such-command"], 2),
    ];
    for (agent, args, code) in steps {
        let mut run = env.circe([&["--json"][..], args].concat());
        if let Some(a) = agent {
            run = run.agent(a);
        }
        let o = run.run();
        o.code(*code);
        let v = o.json();
        if args[0] == "validate" && *code == 3 {
            // validate reports every file, valid or not, rather than one error.
            assert_eq!(v["invalid"], 1, "{}", o.show());
        } else if *code == 6 {
            // Nothing to claim is an answer, not an error.
            assert_eq!(v["nothing_to_claim"], true, "{}", o.show());
        } else if *code != 0 {
            assert!(v["error"]["message"].is_string(), "{}", o.show());
            assert_eq!(v["error"]["exit_code"], *code, "{}", o.show());
        } else {
            assert!(v.get("error").is_none(), "{}", o.show());
        }
    }
}

/// The waiting tasks `inbox` shows best first are in `claim --next`'s order: a task with a
/// deadline goes before one without at the same priority, however long that one waited.
#[test]
fn inbox_lists_the_best_tasks_in_claim_next_order() {
    let env = Env::new();
    env.open_task("BUG-1");
    env.open_task_due("DL-2", "all", "2030-01-01T00:00:00Z");
    let inbox = env.as_("engineer", &["inbox", "--json"]);
    inbox.ok();
    let doc = inbox.json();
    let best: Vec<&str> = doc["claimable"]["best"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["task_id"].as_str().unwrap())
        .collect();
    let next = env.as_("engineer", &["claim", "--next", "--dry-run", "--json"]);
    next.ok();
    assert_eq!(best, ["DL-2", "BUG-1"], "{}", inbox.show());
    assert_eq!(next.json()["task_id"], "DL-2", "{}", next.show());
}

/// `take` of a task another agent holds names the holder (as `claim` does), rather than
/// telling the agent to claim what it cannot.
#[test]
fn take_of_a_task_another_holds_names_the_holder() {
    let env = Env::new();
    env.as_("coordinator", &["agent", "add", "engineer-2", "--role", "engineer"]).ok();
    env.open_task("HELD-1");
    env.as_("engineer", &["claim", "HELD-1"]).ok();
    let o = env.as_("engineer-2", &["take", "HELD-1", "--json"]);
    o.code(4);
    assert_eq!(o.json()["error"]["details"]["owner"], "engineer", "{}", o.show());
    assert!(o.stderr.contains("engineer holds it"), "{}", o.show());
}

/// The release of a waiting task is exit 0 "already"; with a stale `--epoch` it is still
/// the fence's exit 4, as every owner write is.
#[test]
fn a_release_run_again_is_already_and_a_stale_epoch_still_fences() {
    let env = Env::new();
    env.open_task("REL-9");
    env.as_("engineer", &["claim", "REL-9"]).ok();
    env.as_("engineer", &["release", "REL-9"]).ok();
    let again = env.as_("engineer", &["release", "REL-9", "--json"]);
    again.ok();
    assert_eq!(again.json()["already"], true, "{}", again.show());
    let o = env.as_("engineer", &["release", "REL-9", "--epoch", "99"]);
    o.code(4);
    // An epoch the task never had is a mistaken epoch, not a lost lease.
    assert!(o.stderr.contains("never been at epoch 99"), "{}", o.show());
}

#[test]
fn a_change_cut_off_before_its_events_has_them_logged_by_the_next_command() {
    local_only!("the journal lies in tmp/; a database logs in the change's transaction");
    let env = setup();
    let of =
        |kind: &str| env.events().into_iter().filter(|e| e["event"] == kind).collect::<Vec<_>>();
    // Cut off before its commit point: the claim never happened, and nothing is logged.
    let eng = |args: &[&str]| env.circe(args.to_vec()).agent("engineer");
    eng(&["claim", T]).var("CIRCE_CRASH_AT", "claim.before_rename").run().code(86);
    eng(&["claim", T]).var("CIRCE_CRASH_AT", "claim.recorded").run().code(86);
    assert!(of("claim").is_empty());
    let doc = env.circe(["doctor"]).run();
    assert_eq!(doc.code, 1, "{}", doc.show());
    assert!(doc.stderr.contains(&format!("a change of task {T} was cut off")), "{}", doc.show());
    // The task's next command logs the claim first, once.
    env.as_("engineer", &["status", T, "in_progress"]).ok();
    let claims = of("claim");
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert!(claims[0]["what"].as_str().unwrap().starts_with("logged late"), "{claims:?}");
    assert!(claims[0]["id"].as_u64() < of("start")[0]["id"].as_u64());
    assert!(env.ls_all("tmp").is_empty(), "{:?}", env.ls_all("tmp"));
    // A task-complete cut off once its outbox is delivered and cleared: doctor logs both the
    // move and the message's `send`, once.
    env.as_("engineer", &["check", T, "tests_passed=true"]).ok();
    let done = ["send", "--to", "coordinator", "--intent", "task-complete", "--task", T];
    eng(&done).var("CIRCE_CRASH_AT", "outbox.cleared").run().code(86);
    assert!(of("complete").is_empty());
    let fixed = env.circe(["doctor", "--repair"]).run();
    assert!(fixed.stdout.contains("(settled)"), "{}", fixed.show());
    assert_eq!(of("complete").len(), 1);
    let sent = of("send");
    let to_coordinator: Vec<_> =
        sent.iter().filter(|e| e["files"][0]["box"] == "inbox:coordinator").collect();
    assert_eq!(to_coordinator.len(), 1, "{sent:?}");
    env.circe(["doctor"]).run().ok();
    // Cut off after its events were logged: nothing is logged twice.
    eng(&["done", T]).run().ok();
    let t2 = "AUTH-013";
    env.open_task(t2);
    eng(&["claim", t2]).var("CIRCE_CRASH_AT", "task.logged").run().code(86);
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(of("claim").len(), 2);
    assert!(env.ls_all("tmp").is_empty(), "{:?}", env.ls_all("tmp"));
}

#[test]
fn a_cut_off_change_that_did_not_stand_logs_nothing_and_a_cut_off_repair_logs_its_event() {
    local_only!(
        "the journal lies in the task's lock file; a database logs in the change's transaction"
    );
    let env = setup();
    let eng = |args: &[&str]| env.circe(args.to_vec()).agent("engineer");
    let of = |kind: &str| env.events().into_iter().filter(|e| e["event"] == kind).count();
    eng(&["claim", T]).run().ok();
    eng(&["status", T, "in_progress"]).run().ok();
    // A check whose `.checks` was never written (the second write fails): not logged, though
    // `.status` is unchanged.
    let run = ["check", T, "--run", "tests_passed", "--", "true"];
    let o = eng(&run).var("CIRCE_FAIL_IO", "2").run();
    assert_eq!(o.code, 1, "{}", o.show());
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(of("check"), 0, "a check never recorded is not logged");
    // A take cut off before its rename: the ticket never moved, and no `take` is logged.
    eng(&["take", T]).var("CIRCE_CRASH_AT", "take.before_rename").run().code(86);
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(of("take"), 0);
    eng(&["take", T]).run().ok();
    assert_eq!(of("take"), 1);
    // A release cut off after its rename, then the repair that finishes it cut off after its
    // records: the repair's event is logged by the next holder, so the moves still chain.
    eng(&["release", T]).var("CIRCE_CRASH_AT", "release.renamed").run().code(86);
    let claim2 = env.circe(["claim", T]).agent("engineer-2").var("CIRCE_CRASH_AT", "record.status");
    claim2.run().code(86);
    env.circe(["doctor", "--repair"]).run().ok();
    env.as_("engineer-2", &["claim", T]).ok();
    let moves: Vec<(String, String)> = env
        .events()
        .into_iter()
        .filter(|e| e["task_id"] == T && e["to"].is_string())
        .map(|e| (e["from"].as_str().unwrap_or("").to_string(), e["to"].as_str().unwrap().into()))
        .collect();
    for w in moves.windows(2) {
        assert_eq!(w[1].0, w[0].1, "the moves chain: {moves:?}");
    }
    assert_eq!(moves.last().map(|m| m.1.as_str()), Some("claimed"), "{moves:?}");
    env.circe(["doctor"]).run().ok();
}

/// The engineer holds T with `tests_passed` asserted, and its handoff to qa (`test`) is cut
/// off at crash point `at`.
fn handoff_cut_off_at(at: &str) -> Env {
    let env = setup();
    let eng = |args: &[&str]| env.circe(args.to_vec()).agent("engineer");
    eng(&["claim", T]).run().ok();
    eng(&["check", T, "tests_passed=true"]).run().ok();
    let handoff = ["send", "--to", "qa", "--intent", "test", "--task", T, "--summary", "h"];
    eng(&handoff).var("CIRCE_CRASH_AT", at).run().code(86);
    env
}

#[test]
fn a_handoff_cut_off_between_its_status_and_its_checks_is_finished_by_the_next_holder() {
    local_only!("the journal lies in the task's lock file; a database commits the change whole");
    // The handoff's last records: `.status` and `.owner` written, `.checks` (its intent's
    // checks reset) not yet.
    let env = handoff_cut_off_at("record.owner#2");
    assert!(env.read(&format!("TASKS/{T}.checks")).contains("tests_passed: true"));
    env.as_("qa", &["claim", T]).ok();
    // The next holder logged the handoff and wrote its checks before qa's claim.
    assert!(env.read(&format!("TASKS/{T}.checks")).contains("tests_passed: false"));
    let kinds: Vec<String> = env
        .events()
        .into_iter()
        .filter(|e| e["task_id"] == T)
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["open", "claim", "check", "handoff", "claim"], "{kinds:?}");
    // The cut-off write's staged `.checks` is all that is left, for doctor.
    env.circe(["doctor", "--repair"]).run().ok();
    env.circe(["doctor"]).run().ok();
}

/// A handoff cut off once its message is delivered is finished by the next holder, and its
/// `repair` event names the checks the new intent resets.
#[test]
fn a_handoff_finished_by_repair_says_which_checks_it_reset() {
    local_only!("crash points are the local engine's; a database commits the handoff whole");
    let env = handoff_cut_off_at("handoff.delivered");
    env.circe(["doctor", "--repair"]).run().ok();
    assert!(env.read(&format!("TASKS/{T}.checks")).contains("tests_passed: false"));
    let repairs: Vec<String> = env
        .events()
        .into_iter()
        .filter(|e| e["event"] == "repair" && e["task_id"] == T)
        .map(|e| e["what"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        repairs.iter().any(|w| w.starts_with("handoff finished")
            && w.ends_with("checks reset: tests_passed")),
        "{repairs:?}"
    );
}

/// The same cut-off handoff in a record of format 1 (an older circe's: no `v`, no
/// `handoff_checks`): the repair resets every passed check, never keeps a test passed for a
/// test task nobody has tested.
#[test]
fn a_handoff_of_an_older_circe_finished_by_repair_resets_its_checks() {
    local_only!("crash points are the local engine's; a database commits the handoff whole");
    let env = handoff_cut_off_at("handoff.delivered");
    let status = env.root().join(format!("TASKS/{T}.status"));
    let text = std::fs::read_to_string(&status).unwrap();
    let old: String = text
        .lines()
        .filter(|l| !l.starts_with("v:") && !l.starts_with("asserted:"))
        .filter(|l| !l.starts_with("handoff_checks:") && !l.starts_with("- "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(old.contains("handoff:") && !old.contains("handoff_checks"), "{old}");
    std::fs::write(&status, old).unwrap();
    env.circe(["doctor", "--repair"]).run().ok();
    assert!(env.read(&format!("TASKS/{T}.checks")).contains("tests_passed: false"));
    env.as_("qa", &["claim", T]).ok();
    env.as_("qa", &["status", T, "in_progress"]).ok();
    env.as_("qa", &["status", T, "completed"]).code(3);
}

/// The command a refusal's hint gives after `marker`, up to `;`, `(`, a backquote or its end,
/// as words (a `,` that ends one is kept: the caller says where the command ends).
fn hinted(out: &crate::common::Out, marker: &str) -> Vec<String> {
    let hint = out.json()["error"]["hint"].as_str().unwrap_or_default().to_string();
    let at = hint.find(marker).unwrap_or_else(|| panic!("no `{marker}` in the hint: {hint}"));
    let cmd = &hint[at + marker.len()..];
    let cmd = cmd.split([';', '(', '`']).next().unwrap_or_default();
    cmd.split_whitespace().map(|w| w.trim_matches('`').to_string()).collect()
}

/// Refusals on the way to completion give a hint that, run as printed, leads on: the holder
/// of a blocked task is told to unblock it first; a coordinator completing another's task
/// whose check is false is told to ask the holder, or how to assert it as a coordinator; a
/// parked task's claimer is told to ask a coordinator, and the coordinator the command.
#[test]
fn refusal_hints_on_the_way_to_completion_run_as_printed() {
    let env = Env::new();
    env.open_task("T-1");
    env.as_("engineer", &["claim", "T-1"]).ok();
    env.as_("engineer", &["status", "T-1", "in_progress"]).ok();
    env.as_("engineer", &["status", "T-1", "blocked"]).ok();
    let o = env.circe(["--json", "status", "T-1", "completed"]).agent("engineer").run();
    o.code(3);
    let mut cmd = hinted(&o, "first: circe ");
    cmd.truncate(5);
    assert_eq!(cmd, ["--agent", "engineer", "status", "T-1", "in_progress,"], "{}", o.stdout);
    cmd[4] = "in_progress".into();
    env.circe(&cmd).run().ok();
    // The coordinator completes it while its check is false: the holder runs it, or the
    // coordinator asserts it with a reason.
    let o = env.circe(["--json", "status", "T-1", "completed"]).agent("coordinator").run();
    o.code(3);
    let hint = o.json()["error"]["hint"].as_str().unwrap_or_default().to_string();
    assert!(hint.contains("--to agent:engineer --intent request_help"), "{hint}");
    assert!(!hint.contains("--agent engineer"), "names the holder's --agent: {hint}");
    let mut cmd = hinted(&o, "or a coordinator records one with the reason: circe ");
    cmd.retain(|w| w != "\"...\"");
    cmd.push("seen in the call".into());
    env.circe(&cmd).run().ok();
    env.as_("coordinator", &["status", "T-1", "completed"]).ok();
    // Parked: the claimer's hint names a coordinator and the task.
    let cfg = env.circe(["config"]).run().stdout.clone();
    assert!(cfg.contains("max_attempts: 3"), "{cfg}");
    env.set_config(&cfg.replace("max_attempts: 3", "max_attempts: 1"));
    env.open_task("T-2");
    env.as_("engineer", &["claim", "T-2"]).ok();
    env.circe(["reap"]).now("2030-01-01T00:00:00Z").run().ok();
    let o =
        env.circe(["--json", "claim", "T-2"]).agent("engineer").now("2030-01-01T00:00:01Z").run();
    o.code(3);
    let hint = o.json()["error"]["hint"].as_str().unwrap_or_default().to_string();
    assert!(
        hint.contains(
            "ask one, `circe --agent engineer send --to role:coordinator --intent request_help"
        ),
        "{hint}"
    );
    assert!(!hint.contains("--agent coordinator"), "{hint}");
    let o = env
        .circe(["--json", "claim", "T-2"])
        .agent("coordinator")
        .now("2030-01-01T00:00:01Z")
        .run();
    let cmd = hinted(&o, "put it back: circe ");
    env.circe(&cmd).now("2030-01-01T00:00:02Z").run().ok();
    env.as_("engineer", &["claim", "T-2"]).ok();
}

/// A move past its rename whose folder cannot be synced (the second I/O fails): exit 1 with
/// detail `committed` true, since the claim stands; a retry says it is held already.
#[test]
fn a_claim_whose_box_sync_fails_after_its_rename_says_it_stands() {
    local_only!("the folder sync is the local engine's");
    let env = setup();
    let o = env.circe(["--json", "claim", T]).agent("engineer").var("CIRCE_FAIL_IO", "2").run();
    assert_eq!(o.code, 1, "{}", o.show());
    assert_eq!(o.json()["error"]["details"]["committed"], true, "{}", o.show());
    let again = env.as_("engineer", &["claim", T]);
    assert!(again.ok().stdout.contains("already held by engineer"), "{}", again.show());
    env.circe(["doctor", "--repair"]).run().ok();
    env.circe(["doctor"]).run().ok();
}

/// A change refused because another agent holds the task gives the details a lost claim
/// gives (`task_id`, `owner`, `lease_expires_at`): one vocabulary for a program acting on
/// either.
#[test]
fn a_change_by_another_than_the_holder_names_holder_and_lease_as_a_claim_does() {
    let env = setup();
    env.as_("engineer", &["claim", T]).ok();
    let claim = env.as_("engineer-2", &["claim", T, "--json"]);
    let each: [&[&str]; 4] =
        [&["status", T, "in_progress"], &["release", T], &["heartbeat", T], &["take", T]];
    for args in each {
        let o = env.as_("engineer-2", &[args, &["--json"]].concat());
        assert_eq!(o.code, 4, "{}", o.show());
        let (d, c) = (&o.json()["error"]["details"], &claim.json()["error"]["details"]);
        for k in ["task_id", "owner", "lease_expires_at"] {
            assert_eq!(d[k], c[k], "{k}: {}", o.show());
            assert!(d[k].is_string(), "{k}: {}", o.show());
        }
    }
}

/// A `done TASK` cut off part way (an I/O failure at each step in turn) says how many of the
/// task's messages it filed and that `done` again files the rest, which it then does.
#[test]
fn a_done_cut_off_part_way_says_how_far_it_went_and_done_again_finishes() {
    local_only!("the injected I/O failures are the local engine's");
    let mut partial = 0;
    for n in 1..=30 {
        let env = setup();
        env.at(T5, "engineer", &["claim", T]).ok();
        env.at(T5, "engineer", &["status", T, "in_progress"]).ok();
        env.at(T5, "engineer", &["check", T, "tests_passed=true"]).ok();
        env.at(T5, "engineer", &["status", T, "completed"]).ok();
        for s in ["one", "two"] {
            let m = ["send", "--to", "engineer", "--intent", "inform", "--task", T, "--summary", s];
            env.at(T5, "qa", &m).ok();
        }
        let inboxed = |env: &Env| {
            env.state()
                .keys()
                .filter(|k| k.starts_with("AGENTS/engineer/") && k.contains("_AUTH-012"))
                .count()
        };
        assert_eq!(inboxed(&env), 3);
        let o = env
            .circe(["--json", "done", T])
            .agent("engineer")
            .var("CIRCE_FAIL_IO", &n.to_string())
            .run();
        let left = inboxed(&env);
        if o.code == 0 {
            assert_eq!(left, 0, "{}", o.show());
            continue;
        }
        assert_eq!(o.code, 1, "step {n}: {}", o.show());
        let e = &o.json()["error"];
        // Each sentence of the hint once (a change marked as standing twice said it twice).
        let hint = e["hint"].as_str().unwrap_or_default();
        assert!(hint.matches("was made and stands").count() <= 1, "step {n}: {hint}");
        if left > 0 && left < 3 {
            partial += 1;
            assert!(
                e["message"].as_str().unwrap().contains(&format!("of task {T}'s 3 messages filed")),
                "step {n}: {}",
                o.show()
            );
            assert_eq!(e["details"]["filed_count"], 3 - left, "step {n}: {}", o.show());
            assert!(
                e["hint"].as_str().unwrap().contains(&format!("done {T}` again")),
                "{}",
                o.show()
            );
        }
        env.as_("engineer", &["done", T]).ok();
        assert_eq!(inboxed(&env), 0, "step {n}: done again left messages");
    }
    assert!(partial > 0, "no step cut a done part way: the test saw nothing");
}

/// A message another tool named with an intent holding `_` (`..._test_results_AUTH-012.md`,
/// so the name's last field reads `results_AUTH-012`) is the task's when its `task_id` says
/// so: `show` lists it and `done` files it.
#[test]
fn a_message_named_by_another_tool_is_the_task_its_header_names() {
    local_only!("the message is written into the INBOX by hand");
    let env = setup();
    env.at(T5, "engineer", &["claim", T]).ok();
    let name = "20251121_193000_qa-engineer_test_results_AUTH-012.md";
    let text = "# MESSAGE\nfrom: qa\nto: engineer\nintent: test_results\ntask_id: AUTH-012\nstatus: completed\ncreated_at: 2025-11-21T19:30:00Z\n\n## Summary\nall green\n";
    std::fs::write(env.root().join("AGENTS/engineer/INBOX").join(name), text).unwrap();
    let show = env.circe(["show", T]).run();
    assert!(show.ok().stdout.contains(name), "{}", show.show());
    env.at(T5, "engineer", &["status", T, "in_progress"]).ok();
    env.at(T5, "engineer", &["check", T, "tests_passed=true"]).ok();
    env.at(T5, "engineer", &["status", T, "completed"]).ok();
    env.as_("engineer", &["done", T]).ok();
    assert!(env.root().join("LOGS").join(name).is_file(), "{:#?}", env.state().keys());
}

/// `done TASK` files the task's other messages under the first free name in LOGS while the
/// task's transaction is open (on a database root a name taken there ended that
/// transaction, and every `done` failed).
#[test]
fn done_files_a_message_under_a_numbered_name_while_the_task_is_open() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let task = ["send", "--to", "role:engineer", "--intent", "fix_bug", "--task", "T-1"];
    env.as_("coordinator", &[&task[..], &["--summary", "bug"]].concat()).ok();
    let about = ["send", "--to", "role:engineer", "--intent", "inform", "--task", "T-1"];
    env.as_("coordinator", &[&about[..], &["--summary", "about", "--msg-id", "inf-1"]].concat())
        .ok();
    env.as_("engineer-2", &["done", "inf-1"]).ok();
    env.as_("engineer", &["claim", "T-1"]).ok();
    let done = env.as_("engineer", &["done", "T-1"]);
    done.ok();
    assert!(done.stdout.contains(".2.md -> logs"), "{}", done.show());
    env.circe(["doctor"]).run().ok();
}

/// A change that sends a message (`announce: inbox`) prints the record as it is stored,
/// without the outbox it was committed with: the same format version on both engines.
#[test]
fn a_change_that_sends_prints_the_record_as_stored() {
    let env = Env::new();
    env.set_config("version: 1\nannounce: inbox\n");
    env.open_task("T-1");
    env.as_("engineer", &["claim", "T-1"]).ok();
    let moved = env.as_("engineer", &["status", "T-1", "in_progress", "--json"]);
    moved.ok();
    let shown = env.circe(["show", "T-1", "--json"]).run();
    assert_eq!(moved.json()["task"]["v"], shown.json()["task"]["v"], "{}", moved.show());
}

/// An agent whose lease ran out and whose task a reap put back in the queue is told so by
/// its next command (a status, a heartbeat; with `--epoch` as a conflict), with the claim
/// that takes it again, not "cannot move a task that is new" or "another agent took it".
#[test]
fn an_agent_whose_lease_ran_out_is_told_its_task_went_back() {
    let env = Env::new();
    env.open_task("T-1");
    env.as_("engineer", &["claim", "T-1"]).ok();
    env.as_("engineer", &["status", "T-1", "in_progress"]).ok();
    env.circe(["reap"]).now("2025-11-21T18:00:00Z").run().ok();
    assert_eq!(env.record("T-1").status.as_str(), "new");
    for args in [&["status", "T-1", "completed"][..], &["heartbeat", "T-1"]] {
        let o = env.as_("engineer", args);
        o.code(3);
        assert!(o.stderr.contains("it went back to the queue"), "{}", o.show());
        assert!(o.stderr.contains("circe --agent engineer claim T-1"), "{}", o.show());
    }
    let fenced = env.as_("engineer", &["status", "T-1", "completed", "--epoch", "1"]);
    fenced.code(4);
    assert!(fenced.stderr.contains("no one holds it now"), "{}", fenced.show());
    assert!(!fenced.stderr.contains("another agent took"), "{}", fenced.show());
}

/// Every refusal, conflict or not-found of a command on one task names the task in its
/// JSON details, so a program need not read the message.
#[test]
fn a_task_commands_errors_name_the_task_in_their_details() {
    let env = Env::new();
    env.open_task("T1");
    let task_of = |args: &[&str], code: i32| {
        let o = env.as_("engineer", &[&["--json"][..], args].concat());
        o.code(code);
        o.json()["error"]["details"]["task_id"].clone()
    };
    // Refused: completing a task nobody claimed.
    assert_eq!(task_of(&["status", "T1", "completed"], 3), "T1");
    // Conflict: a second opening of a waiting task.
    let again = ["send", "--to", "all", "--intent", "implement_feature", "--task", "T1"];
    let o = env.as_("coordinator", &[&["--json"][..], &again, &["--summary", "again"]].concat());
    o.code(4);
    assert_eq!(o.json()["error"]["details"]["task_id"], "T1", "{}", o.show());
    // Conflict: a stale epoch.
    env.as_("engineer", &["claim", "T1"]).ok();
    // A send about the task: a completion refused (claimed, not started), a task that is none.
    for (task, code) in [("T1", 3), ("T8", 5)] {
        let done = ["send", "--to", "coordinator", "--intent", "task-complete", "--task", task];
        let o = env.as_("engineer", &[&["--json"][..], &done, &["--summary", "done"]].concat());
        o.code(code);
        assert_eq!(o.json()["error"]["details"]["task_id"], task, "{}", o.show());
    }
    assert_eq!(task_of(&["heartbeat", "T1", "--epoch", "7"], 4), "T1");
    // Not found.
    assert_eq!(task_of(&["release", "T9"], 5), "T9");
    // An acting agent that is none is no error about the task.
    let o = env.circe(["--json", "--agent", "nobody", "status", "T1", "in_progress"]).run();
    o.code(5);
    assert!(o.json()["error"]["details"].get("task_id").is_none(), "{}", o.show());
}

/// A check name that is no name (asserted or run) is refused as an error of a command on
/// its task: its JSON names the task in `details.task_id`, as the task's other refusals do.
#[test]
fn a_malformed_check_name_names_the_task_in_its_details() {
    let env = Env::new();
    env.open_task("T1");
    env.as_("engineer", &["claim", "T1"]).ok();
    for args in
        [&["check", "T1", "bad name=true"][..], &["check", "T1", "--run", "bad name", "--", "true"]]
    {
        let o = env.as_("engineer", &[&["--json"][..], args].concat());
        o.code(3);
        let e = &o.json()["error"];
        assert!(
            e["message"].as_str().unwrap().starts_with("check name `bad name`"),
            "{}",
            o.show()
        );
        assert_eq!(e["details"]["task_id"], "T1", "{}", o.show());
    }
}

/// `release --force` by an agent that is no coordinator: of a held task, refused as the
/// coordinator's flag; of a finished one, refused as final for anyone (no advice to ask a
/// coordinator, who could not release it either).
#[test]
fn a_forced_release_of_a_finished_task_is_refused_as_final() {
    let env = Env::new();
    env.complete_task("T1");
    let o = env.as_("qa", &["release", "--force", "T1", "--reason", "again"]);
    o.code(3);
    assert!(o.stderr.contains("is final"), "{}", o.show());
    assert!(!o.stderr.contains("is for a coordinator"), "{}", o.show());
}
