//! `agent retire` racing the agent's own claim, in both orders it can happen:
//! - the claim looked before the retirement and commits after it (`claim-slow-commit`
//!   holds it between the two, with the task's lock): the retirement's look under that
//!   lock waits for the commit and releases the task; a retirement that looks without the
//!   lock (`retire-unlocked`, the broken variant) leaves the task held by a retired agent;
//! - the claim read the agents before the retirement and picks the task after the
//!   retirement's look passed it (`claim-slow-pick`): the claim reads the retirement again
//!   under the task's lock and is refused; a claim that does not (`claim-unchecked`, the
//!   broken variant) leaves the task held.

use std::time::Duration;

use crate::common::Root;

/// Who holds T1 once a claim by e1, slowed by the scene in `claim_env`, met `agent retire
/// e1` (run with `retire_env`), and the claim's exit code.
fn holder_after_the_race(claim_env: &str, retire_env: &[(&str, &str)]) -> (Option<String>, i32) {
    let r = Root::new(1);
    r.open("T1");
    let slow = [("CIRCE_TEST_BREAK", claim_env)];
    let mut claim = r.cmd(Some("e1"), &["claim", "T1"], &slow).spawn().unwrap();
    // The claim waits (1.5 s) in its scene.
    std::thread::sleep(Duration::from_millis(500));
    let retire = r.run_env(Some("coordinator"), &["agent", "retire", "e1"], retire_env);
    assert_eq!(retire.code, 0, "{retire:?}");
    let code = claim.wait().unwrap().code().unwrap_or(-1);
    let shown = r.ok(None, &["--json", "show", "T1"]);
    let v: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    let task = &v["task"];
    let holder =
        (task["status"] != "new").then(|| task["owner"].as_str().unwrap_or_default().to_string());
    (holder, code)
}

#[test]
fn a_claim_racing_its_agents_retirement_leaves_no_task_held() {
    let (holder, _) = holder_after_the_race("claim-slow-commit", &[]);
    assert_eq!(holder, None, "the retired agent holds the task");
}

#[test]
fn the_retire_race_checker_catches_a_look_without_the_lock() {
    let broken = [("CIRCE_TEST_BREAK", "retire-unlocked")];
    assert_eq!(holder_after_the_race("claim-slow-commit", &broken).0.as_deref(), Some("e1"));
}

#[test]
fn a_claim_picking_after_the_retirements_look_is_refused() {
    let (holder, code) = holder_after_the_race("claim-slow-pick", &[]);
    assert_eq!(holder, None, "the retired agent holds the task");
    assert_eq!(code, 3, "the claim is refused by a rule");
}

#[test]
fn the_retire_race_checker_catches_a_claim_that_does_not_read_again() {
    let (holder, code) = holder_after_the_race("claim-slow-pick,claim-unchecked", &[]);
    assert_eq!(holder.as_deref(), Some("e1"));
    assert_eq!(code, 0);
}
