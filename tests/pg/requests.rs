//! Ambiguous commits: a claim whose client cannot know it won (the connection broke after
//! COMMIT) exits 1, never 0, and prints its request id; the retry with that id returns the
//! task the first run got instead of taking a second one.

use crate::common::Root;

/// A claim whose reply is lost, then its retry. Returns (the first exit code, the request
/// id it printed, the retry's task, how many tasks e1 holds afterwards).
fn lost_reply_then_retry(root: &Root, retry_break: Option<&str>) -> (i32, String, String, usize) {
    root.open_tasks(3);
    let mut first = root.command(Some("e1"), &["claim", "--next", "--json"]);
    first.env("CIRCE_TEST_BREAK", "pg-lost-reply");
    if let Some(b) = retry_break {
        first.env("CIRCE_TEST_BREAK", format!("pg-lost-reply,{b}"));
    }
    let first = crate::common::Out::from(&first.output().unwrap());
    let err = first.json();
    let id = err["error"]["details"]["request_id"].as_str().unwrap_or_default().to_string();
    let mut retry = root.command(Some("e1"), &["claim", "--next", "--request-id", &id, "--json"]);
    if let Some(b) = retry_break {
        retry.env("CIRCE_TEST_BREAK", b);
    }
    let retry = crate::common::Out::from(&retry.output().unwrap());
    let task = retry.json()["task_id"].as_str().unwrap_or_default().to_string();
    let mut held = 0;
    root.engine()
        .board(&mut |r| {
            if r.owner.as_deref() == Some("e1") {
                held += 1;
            }
            Ok(())
        })
        .unwrap();
    (first.code, id, task, held)
}

#[test]
fn a_claim_of_unknown_outcome_exits_1_and_its_retry_returns_the_same_task() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 1);
    let (code, id, task, held) = lost_reply_then_retry(&root, None);
    assert_eq!(code, 1, "an unknown outcome is exit 1");
    assert!(!id.is_empty(), "the request id is printed");
    assert_eq!(task, "T-000", "the retry returns the task the first run got");
    assert_eq!(held, 1, "the retry took no second task");
    // Claiming a task by id with that request id returns it too; another id is refused.
    root.run(Some("e1"), &["claim", "T-000", "--request-id", &id]).ok();
    assert_eq!(root.run(Some("e1"), &["claim", "T-001", "--request-id", &id]).code, 2);
}

/// The checker fails when claims do not store their request id.
#[test]
fn the_retry_checker_sees_a_second_task_when_request_ids_are_forgotten() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 1);
    let (_, _, _, held) = lost_reply_then_retry(&root, Some("pg-forget-request"));
    assert_eq!(held, 2, "the broken variant should have taken a second task");
}

#[test]
fn a_newer_schema_is_refused_and_a_password_in_the_url_too() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 1);
    let schema = url.rsplit("schema=").next().unwrap();
    c.psql(&format!("UPDATE \"{schema}\".meta SET value = '99' WHERE key = 'schema_version'"));
    let out = root.run(None, &["tasks"]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("schema version 99") && out.stderr.contains("upgrade circe"),
        "{}",
        out.stderr
    );
    let with_password = url.replace("postgres@", "postgres:secret@");
    let out = Root::at(&with_password).run(None, &["tasks"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("password") && out.stderr.contains("hint:"), "{}", out.stderr);
}

/// `wait --for claimable --claim` whose claim's reply is lost connects again and retries
/// it by its request id: it answers with the task it got (exit 0) and takes no second one.
/// The broken variant (the request id forgotten) takes a second task.
#[test]
fn a_claiming_wait_whose_reply_is_lost_answers_with_the_task_it_got() {
    let c = need_pg!();
    for (breaks, broken) in [("pg-lost-reply", false), ("pg-lost-reply,pg-forget-request", true)] {
        let root = Root::new(&c.fresh_url(), "server", 1);
        root.open_tasks(3);
        let mut wait = root.command(
            Some("e1"),
            &["wait", "--for", "claimable", "--claim", "--timeout", "5s", "--json"],
        );
        wait.env("CIRCE_TEST_BREAK", breaks);
        let out = crate::common::Out::from(&wait.output().unwrap());
        let mut held = Vec::new();
        root.engine()
            .board(&mut |r| {
                if r.owner.as_deref() == Some("e1") {
                    held.push(r.task.to_string());
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(held.len() > 1, broken, "{breaks}: e1 holds {held:?}; {}", out.stderr);
        if !broken {
            assert_eq!(out.code, 0, "{}", out.stderr);
            assert_eq!(out.json()["claimed"]["task_id"], "T-000", "{}", out.stdout);
            assert!(out.stderr.contains("the outcome is unknown"), "{}", out.stderr);
        }
    }
}
