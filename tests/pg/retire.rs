//! `agent retire` racing the agent's own claim on a database root, in both orders it can
//! happen (as `tests/torture/retire.rs` on a local root):
//! - the claim picked and locked the task before the retirement and commits after it
//!   (`claim-slow-commit`): the commit statement reads the retirement and changes nothing;
//!   a claim that does not read it (`claim-unchecked`) commits, and the retirement's look,
//!   waiting for the task's row lock, releases the task; without both (`retire-unlocked`
//!   too) the retired agent keeps it;
//! - the claim read the agents before the retirement and picks the task after the
//!   retirement's look passed it (`claim-slow-pick`): the commit statement reads the
//!   retirement under the row lock and changes nothing; without that read
//!   (`claim-unchecked`) the retired agent holds the task.
//!
//! And on a warm connection, where a claim commits through `commit_task`.

use std::time::Duration;

use crate::common::Root;

/// Who holds T-000 once a claim by e1, slowed by the scene in `claim_break`, met `agent
/// retire e1` (run with `retire_break`), and the claim's exit code.
fn holder_after_the_race(
    c: &crate::pg_cluster::Cluster,
    claim_break: &str,
    retire_break: Option<&str>,
) -> (Option<String>, i32) {
    let mut r = Root::new(&c.fresh_url(), "server", 1);
    r.open_tasks(1);
    r.env = vec![("CIRCE_TEST_BREAK".into(), claim_break.into())];
    let claim = r.command(Some("e1"), &["claim", "T-000"]).spawn().unwrap();
    // The claim waits (1.5 s) in its scene.
    std::thread::sleep(Duration::from_millis(500));
    r.env = retire_break.map(|b| ("CIRCE_TEST_BREAK".into(), b.into())).into_iter().collect();
    let retire = r.run(Some("coordinator"), &["agent", "retire", "e1"]);
    assert_eq!(retire.code, 0, "{retire:?}");
    let code = claim.wait_with_output().unwrap().status.code().unwrap_or(-1);
    r.env.clear();
    let task = &r.run(None, &["--json", "show", "T-000"]).ok().json()["task"];
    let holder =
        (task["status"] != "new").then(|| task["owner"].as_str().unwrap_or_default().to_string());
    (holder, code)
}

#[test]
fn a_claim_committing_after_the_retirement_leaves_no_task_held() {
    let c = need_pg!();
    let (holder, _) = holder_after_the_race(c, "claim-slow-commit", None);
    assert_eq!(holder, None, "the retired agent holds the task");
}

#[test]
fn the_retirements_look_under_the_lock_releases_a_task_claimed_meanwhile() {
    let c = need_pg!();
    let (holder, code) = holder_after_the_race(c, "claim-slow-commit,claim-unchecked", None);
    assert_eq!(holder, None, "the retired agent holds the task");
    assert_eq!(code, 0, "the claim went through before the release");
}

#[test]
fn the_retire_race_checker_catches_a_look_without_the_lock() {
    let c = need_pg!();
    let both = "claim-slow-commit,claim-unchecked";
    let (holder, _) = holder_after_the_race(c, both, Some("retire-unlocked"));
    assert_eq!(holder.as_deref(), Some("e1"));
}

#[test]
fn a_claim_picking_after_the_retirements_look_is_refused_in_its_commit() {
    let c = need_pg!();
    let (holder, code) = holder_after_the_race(c, "claim-slow-pick", None);
    assert_eq!(holder, None, "the retired agent holds the task");
    assert_eq!(code, 3, "the claim is refused by a rule");
}

#[test]
fn the_retire_race_checker_catches_a_commit_that_does_not_read_it() {
    let c = need_pg!();
    let (holder, code) = holder_after_the_race(c, "claim-slow-pick,claim-unchecked", None);
    assert_eq!(holder.as_deref(), Some("e1"));
    assert_eq!(code, 0);
}

#[test]
fn on_a_warm_connection_a_retired_claimers_claim_changes_nothing() {
    use circe::engine::RootSpec;
    use circe::names::TaskId;
    let c = need_pg!();
    let r = Root::new(&c.fresh_url(), "server", 1);
    r.open_tasks(2);
    let ws = circe::workspace::Workspace::open(&RootSpec::Url(r.url.clone())).unwrap();
    let (me, role) = ws.agent(Some("e1")).unwrap();
    // A first change on the connection (by the plain statement): the next goes through
    // `commit_task`.
    circe::ops::claim(&ws, &me, &role, &TaskId::new("T-001").unwrap(), None).unwrap();
    r.run(Some("coordinator"), &["agent", "retire", "e1"]).ok();
    let feed = || r.events().len();
    let before = feed();
    let err = circe::ops::claim(&ws, &me, &role, &TaskId::new("T-000").unwrap(), None)
        .expect_err("a retired agent's claim is refused");
    assert_eq!(err.kind, circe::error::Kind::Refused, "{}", err.chain());
    assert!(err.details.iter().any(|(k, _)| *k == "retired"), "{:?}", err.details);
    let task = &r.run(None, &["--json", "show", "T-000"]).ok().json()["task"];
    assert_eq!(task["status"], "new", "{task}");
    assert_eq!(feed(), before, "the refused claim logged nothing");
    // The connection is usable after the refusal.
    assert_eq!(ws.engine.task_ids().unwrap().len(), 2);
}
