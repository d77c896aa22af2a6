//! `circe status` and `circe tasks --status` take circe's status words and the TX
//! spellings that name a task status (PROTOCOLS.md section 7).

use crate::common::{Env, assert_unchanged};

const T5: &str = "2025-11-21T17:05:00Z";

/// Task `task` claimed by engineer, in progress, its check passed.
fn held(env: &Env, task: &str) {
    env.open_task(task);
    env.at(T5, "engineer", &["claim", task]).ok();
    env.at(T5, "engineer", &["status", task, "in-progress"]).ok();
    env.at(T5, "engineer", &["check", task, "tests_passed=true"]).ok();
}

#[test]
fn tx_spellings_name_the_same_statuses() {
    let env = Env::new();
    for (task, word, status) in [
        ("T-1", "complete", "completed"),
        ("T-2", "approved", "completed"),
        ("T-3", "rejected", "failed"),
        ("T-4", "blocked", "blocked"),
        ("T-5", "completed", "completed"),
    ] {
        held(&env, task);
        let o = env.at(T5, "engineer", &["status", task, word]);
        o.ok();
        assert_eq!(env.record(task).status.as_str(), status, "{word}: {}", o.show());
    }
    let o = env.circe(["tasks", "--status", "complete", "--json"]).run();
    o.ok();
    let rows = o.json()["tasks"].as_array().unwrap().len();
    assert_eq!(rows, 3, "{}", o.show());
    env.circe(["tasks", "--status", "in-progress"]).run().ok();
}

#[test]
fn start_and_unknown_words_are_usage_errors() {
    let env = Env::new();
    held(&env, "T-1");
    let before = env.state();
    let o = env.at(T5, "engineer", &["status", "T-1", "start"]);
    o.code(2);
    assert!(o.stderr.contains("hint:") && o.stderr.contains("in_progress"), "{}", o.show());
    for word in ["fail", "done", "Completed", "in progress"] {
        let o = env.at(T5, "engineer", &["status", "T-1", word]);
        o.code(2);
        assert!(o.stderr.contains("complete"), "{}", o.show());
    }
    env.circe(["tasks", "--status", "start"]).run().code(2);
    // TX's `pending` is a new request too: as a move it would mean release.
    let o = env.at(T5, "engineer", &["status", "T-1", "pending"]);
    o.code(2);
    assert!(o.stderr.contains("new request"), "{}", o.show());
    assert_unchanged(&before, &env.state());
}
