//! Request ids and message ids (the same meaning for every engine): a claim retried with
//! its request id returns the grant it made; a message id is never delivered twice.

use crate::common::Env;

#[test]
fn a_claim_retried_with_its_request_id_returns_the_same_task() {
    let env = Env::new();
    env.open_task("T-1");
    env.open_task("T-2");
    let a = env.as_("engineer", &["claim", "--next", "--request-id", "r-1", "--json"]);
    a.ok();
    let b = env.as_("engineer", &["claim", "--next", "--request-id", "r-1", "--json"]);
    b.ok();
    assert_eq!(a.json()["task_id"], b.json()["task_id"]);
    assert_eq!(b.json()["already_held"], true);
    assert_eq!(env.record("T-2").status.as_str(), "new", "no second task was taken");
    // A request id names one claim: another task with it is a usage error.
    env.as_("engineer", &["claim", "T-2", "--request-id", "r-1"]).code(2);
    // Without a request id, claim --next means the next task.
    let c = env.as_("engineer", &["claim", "--next", "--json"]);
    c.ok();
    assert_eq!(c.json()["task_id"], "T-2");
    // Once the task changed hands, the old request id no longer returns it.
    env.as_("engineer", &["release", "T-1"]).ok();
    env.as_("engineer-2", &["claim", "T-1"]).code(5);
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.as_("engineer-2", &["claim", "T-1"]).ok();
    env.as_("engineer", &["claim", "--next", "--request-id", "r-1"]).code(4);
}

#[test]
fn a_message_id_is_delivered_once() {
    let env = Env::new();
    let send = ["send", "--to", "qa", "--intent", "inform", "--summary", "hi", "--msg-id"];
    let id = "20251121T170000000Z-aaaaaaaa";
    let a = env.as_("engineer", &[&send[..], &[id, "--json"]].concat());
    a.ok();
    let b = env.as_("engineer", &[&send[..], &[id, "--json"]].concat());
    b.ok();
    assert_eq!(b.json()["already_delivered"], true);
    assert_eq!(env.ls("AGENTS/qa/INBOX").len(), 1, "delivered once");
    let tid = "20251121T170000000Z-bbbbbbbb";
    for _ in 0..2 {
        env.as_(
            "coordinator",
            &[
                "send",
                "--to",
                "all",
                "--intent",
                "implement_feature",
                "--task",
                "T-9",
                "--summary",
                "x",
                "--msg-id",
                tid,
            ],
        )
        .ok();
    }
    assert_eq!(env.ls("NEW_MESSAGES").len(), 1, "a task message too");
}
