//! `agent retire` racing the agent's own claim: the claim looked before the retirement and
//! commits after it (`claim-slow-commit` holds it between the two, with the task's lock).
//! The retirement's look under that lock waits for the commit and releases the task; a
//! retirement that looks without the lock (`retire-unlocked`, the broken variant) leaves
//! the task held by a retired agent.

use std::time::Duration;

use crate::common::Root;

/// Who holds T1 once a claim by e1, slowed after its look, met `agent retire e1`.
fn holder_after_the_race(broken: &[(&str, &str)]) -> Option<String> {
    let r = Root::new(1);
    r.open("T1");
    let slow = [("CIRCE_TEST_BREAK", "claim-slow-commit")];
    let mut claim = r.cmd(Some("e1"), &["claim", "T1"], &slow).spawn().unwrap();
    // The claim has looked and waits holding the lock (it waits 1.5 s).
    std::thread::sleep(Duration::from_millis(500));
    let retire = r.run_env(Some("coordinator"), &["agent", "retire", "e1"], broken);
    assert_eq!(retire.code, 0, "{retire:?}");
    let _ = claim.wait();
    let shown = r.ok(None, &["--json", "show", "T1"]);
    let v: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    let task = &v["task"];
    (task["status"] != "new").then(|| task["owner"].as_str().unwrap_or_default().to_string())
}

#[test]
fn a_claim_racing_its_agents_retirement_leaves_no_task_held() {
    assert_eq!(holder_after_the_race(&[]), None, "the retired agent holds the task");
}

#[test]
fn the_retire_race_checker_catches_a_look_without_the_lock() {
    let broken = [("CIRCE_TEST_BREAK", "retire-unlocked")];
    assert_eq!(holder_after_the_race(&broken).as_deref(), Some("e1"));
}
