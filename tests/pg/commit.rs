//! A task change whose check fails inside the commit changes nothing: the record, the
//! message, the feed and the grants stay as they were, and the command exits 4. Both ways
//! a change commits are checked: the plain statement (a connection's first change, as in
//! every CLI run) and `commit_task` (later changes on a connection, as in a library user).

use crate::common::Root;

/// The root's schema, from its URL.
fn schema_of(url: &str) -> String {
    url.rsplit_once("schema=").map(|(_, s)| s.to_string()).unwrap()
}

#[test]
fn a_claim_whose_message_was_moved_by_hand_exits_4_and_changes_nothing() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = schema_of(&url);
    let root = Root::new(&url, "server", 1);
    root.open_tasks(1);
    // The ticket is moved behind circe's back: the task says it waits in `new`.
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'logs' WHERE box = 'new'"));
    let before = state_of(c, &schema, "T-000");
    let out = root.run(Some("e1"), &["claim", "T-000", "--json"]);
    assert_eq!(out.code, 4, "a conflict: {} {}", out.stdout, out.stderr);
    let msg = out.json()["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("is not in"), "says where the message was looked for: {msg}");
    assert_eq!(state_of(c, &schema, "T-000"), before, "the refused claim changed nothing");
    // Put back, the same claim goes through (the statement is not refusing everything).
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'new' WHERE box = 'logs'"));
    root.run(Some("e1"), &["claim", "T-000"]).ok();
    assert_ne!(state_of(c, &schema, "T-000"), before, "the claim changed the task");
}

#[test]
fn on_a_warm_connection_too_a_refused_claim_changes_nothing() {
    use circe::engine::RootSpec;
    use circe::names::TaskId;
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = schema_of(&url);
    let root = Root::new(&url, "server", 1);
    root.open_tasks(2);
    let ws = circe::workspace::Workspace::open(&RootSpec::Url(url.clone())).unwrap();
    let (me, role) = ws.agent(Some("e1")).unwrap();
    // A first change on the connection (by the plain statement): the next goes through
    // `commit_task`.
    let t1 = TaskId::new("T-001").unwrap();
    circe::ops::claim(&ws, &me, &role, &t1, None).unwrap();
    let q = format!("UPDATE \"{schema}\".messages SET box = 'logs' WHERE box = 'new'");
    c.psql(&q);
    let before = state_of(c, &schema, "T-000");
    let t0 = TaskId::new("T-000").unwrap();
    let err = circe::ops::claim(&ws, &me, &role, &t0, None).unwrap_err();
    assert_eq!(err.kind, circe::error::Kind::Conflict, "{}", err.chain());
    assert!(err.chain().contains("is not in"), "{}", err.chain());
    assert_eq!(state_of(c, &schema, "T-000"), before, "the refused claim changed nothing");
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'new' WHERE box = 'logs'"));
    circe::ops::claim(&ws, &me, &role, &t0, None).unwrap();
    assert_ne!(state_of(c, &schema, "T-000"), before, "the claim changed the task");
}

/// What a claim of `task` may change, as text: the task's row, where the messages lie,
/// the feed's last id and the grants.
fn state_of(c: &crate::pg_cluster::Cluster, schema: &str, task: &str) -> String {
    c.psql(&format!(
        "SELECT (SELECT to_jsonb(t)::text FROM \"{schema}\".tasks t WHERE task_id = '{task}'),
                (SELECT string_agg(box || '/' || file, ',' ORDER BY box, file) FROM \"{schema}\".messages),
                (SELECT last FROM \"{schema}\".feed),
                (SELECT count(*) FROM \"{schema}\".grants)"
    ))
}
