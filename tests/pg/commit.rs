//! A task change whose check fails inside the commit statement changes nothing: the
//! record, the message, the feed and the grants stay as they were, and the command exits 4.

use crate::common::Root;

/// What a claim may change, as text: the task's row, where its messages lie, the feed's
/// last id and the grants.
fn state(c: &crate::pg_cluster::Cluster, schema: &str) -> String {
    c.psql(&format!(
        "SELECT (SELECT to_jsonb(t)::text FROM \"{schema}\".tasks t),
                (SELECT string_agg(box || '/' || file, ',' ORDER BY box, file) FROM \"{schema}\".messages),
                (SELECT last FROM \"{schema}\".feed),
                (SELECT count(*) FROM \"{schema}\".grants)"
    ))
}

#[test]
fn a_claim_whose_message_was_moved_by_hand_exits_4_and_changes_nothing() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit_once("schema=").map(|(_, s)| s.to_string()).unwrap();
    let root = Root::new(&url, "server", 1);
    root.open_tasks(1);
    // The ticket is moved behind circe's back: the task says it waits in `new`.
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'logs' WHERE box = 'new'"));
    let before = state(c, &schema);
    let out = root.run(Some("e1"), &["claim", "T-000", "--json"]);
    assert_eq!(out.code, 4, "a conflict: {} {}", out.stdout, out.stderr);
    let msg = out.json()["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("is not in"), "says where the message was looked for: {msg}");
    assert_eq!(state(c, &schema), before, "the refused claim changed nothing");
    // Put back, the same claim goes through (the statement is not refusing everything).
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'new' WHERE box = 'logs'"));
    root.run(Some("e1"), &["claim", "T-000"]).ok();
    assert_ne!(state(c, &schema), before, "the claim changed the task");
}
