//! The seconds where a rule turns: a lease has run out at the very second it ends, a task is
//! past its deadline at the very second it is due, and a task an agent may not take is not
//! offered to it. Each rule is asserted one second before and at the second itself, on both
//! engines (the database one compares the same way, in SQL).

use crate::common::Env;

const T0: &str = "2026-01-01T10:00:00Z";

/// `inbox --json`'s count of waiting tasks `agent` may claim.
fn claimable(env: &Env, now: &str, agent: &str) -> u64 {
    let o = env.at(now, agent, &["inbox", "--json"]);
    o.ok().json()["claimable"]["count"].as_u64().unwrap()
}

/// The task ids `reap --json` returned at `now`.
fn reaped(env: &Env, now: &str) -> Vec<String> {
    let o = env.circe(["reap", "--json"]).now(now).run();
    o.ok().json()["reaped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["task_id"].as_str().unwrap().to_string())
        .collect()
}

/// A lease has run out at its very second: one second before, `claim --next` by another
/// engineer finds nothing and `reap` returns nothing; at it, `claim --next` would take it
/// over and `reap` returns it.
#[test]
fn a_lease_runs_out_at_its_very_second() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let open = ["send", "--to", "engineer", "--intent", "implement_feature", "--task", "T1"];
    env.at(T0, "coordinator", &[&open[..], &["--summary", "x"]].concat()).ok();
    let claim = env.at(T0, "engineer", &["claim", "T1", "--json"]);
    let lease = claim.ok().json()["lease_expires_at"].as_str().unwrap().to_string();
    assert_eq!(lease, "2026-01-01T10:30:00Z");
    let before = "2026-01-01T10:29:59Z";
    env.at(before, "engineer-2", &["claim", "--next", "--dry-run"]).code(6);
    assert!(reaped(&env, before).is_empty());
    let at = env.at(&lease, "engineer-2", &["claim", "--next", "--dry-run", "--json"]);
    assert_eq!(at.ok().json()["task_id"], "T1", "{}", at.show());
    // The table says the same: 1s left a second before, run out at it.
    let lease_cell = |now: &str| {
        let t = env.at(now, "engineer", &["tasks"]);
        let row = t.ok().stdout.lines().find(|l| l.starts_with("T1")).unwrap_or_default();
        row.split_whitespace().nth(5).unwrap_or_default().to_string()
    };
    assert_eq!(lease_cell(before), "1s");
    assert_eq!(lease_cell(&lease), "expired");
    assert_eq!(reaped(&env, &lease), ["T1"]);
}

/// A task is past its deadline at its very second: one second before it is offered and may
/// be claimed; at it, `inbox` no longer counts it, `claim` refuses it (exit 3) and `reap`
/// expires it.
#[test]
fn a_deadline_passes_at_its_very_second() {
    let env = Env::new();
    let due = "2026-01-01T11:00:00Z";
    let open = ["send", "--to", "engineer", "--intent", "implement_feature", "--task", "T3"];
    env.at(T0, "coordinator", &[&open[..], &["--summary", "y", "--deadline", due]].concat()).ok();
    let before = "2026-01-01T10:59:59Z";
    assert_eq!(claimable(&env, before, "engineer"), 1);
    env.at(before, "engineer", &["claim", "T3", "--dry-run"]).ok();
    assert!(reaped(&env, before).is_empty());
    assert_eq!(claimable(&env, due, "engineer"), 0);
    env.at(due, "engineer", &["claim", "T3", "--dry-run"]).code(3);
    assert_eq!(reaped(&env, due), ["T3"]);
}

/// A task addressed to everyone with an intent an agent's role may not receive is not
/// offered to that agent: `inbox` does not count it and `claim --next` finds nothing, while
/// an engineer is offered it.
#[test]
fn a_task_an_agent_may_not_take_is_not_offered_to_it() {
    let env = Env::new();
    let open = ["send", "--to", "all", "--intent", "implement_feature", "--task", "T2"];
    env.at(T0, "coordinator", &[&open[..], &["--summary", "x"]].concat()).ok();
    assert_eq!(claimable(&env, T0, "qa"), 0);
    env.at(T0, "qa", &["claim", "--next", "--dry-run"]).code(6);
    assert_eq!(claimable(&env, T0, "engineer"), 1);
}

/// Time given on the command line at its edges: a deadline duration out of range says so
/// (not "neither a time nor a duration"), an interval in ms is held to 365d as in any unit,
/// a `CIRCE_NOW` that does not read is refused (not passed over for the real clock), and a
/// lease taken part-way through a second is rounded up, never shorter than its ttl.
#[test]
fn time_on_the_command_line_at_its_edges() {
    let env = Env::new();
    let send = ["send", "--to", "agent:qa", "--intent", "inform", "--summary", "x", "--deadline"];
    let far = env.as_("coordinator", &[&send[..], &["400d"]].concat());
    far.code(2);
    assert!(
        far.stderr.contains("out of range") && far.stderr.contains("2027-12-01"),
        "{}",
        far.show()
    );
    let ms = env.circe(["wait", "--for", "inbox", "--timeout", "31622400000ms"]).agent("qa").run();
    ms.code(2);
    assert!(ms.stderr.contains("from 1ms to 365d"), "{}", ms.show());
    let unread = env.circe(["tasks"]).var("CIRCE_NOW", "2026-01-01").run();
    unread.code(2);
    assert!(unread.stderr.contains("CIRCE_NOW `2026-01-01`"), "{}", unread.show());
    env.open_task("T-1");
    let claim = env.circe(["claim", "T-1", "--ttl", "1s", "--json"]).agent("engineer");
    let claimed = claim.now("2025-11-21T17:00:00.999Z").run();
    claimed.ok();
    assert_eq!(claimed.json()["lease_expires_at"], "2025-11-21T17:00:02Z", "{}", claimed.show());
}

/// A root URL of a scheme circe does not read (`pg://`) is refused as no root, saying which
/// schemes are database URLs.
#[test]
fn a_root_url_of_another_scheme_says_which_schemes_circe_reads() {
    let env = Env::new();
    let out = env.circe(["--root", "pg://circe@db.example/circe?schema=a", "tasks"]).run();
    out.code(2);
    let said = "`pg://` is no URL circe reads: a database root's URL starts with postgres://";
    assert!(out.stderr.contains(said), "{}", out.show());
}
