//! A task change whose check fails inside the commit changes nothing: the record, the
//! message, the feed and the grants stay as they were, and the command exits 4. Both ways
//! a change commits are checked: the plain statement (a connection's first change, as in
//! every CLI run) and `commit_task` (later changes on a connection, as in a library user).

use crate::common::Root;
use crate::pg_cluster::Cluster;

/// The root's schema, from its URL.
fn schema_of(url: &str) -> String {
    url.rsplit_once("schema=").map(|(_, s)| s.to_string()).unwrap()
}

/// What a claim of T-000 may change, as text: the task's row, where the messages lie, the
/// feed's last id and the grants.
fn state(c: &Cluster, schema: &str) -> String {
    c.psql(&format!(
        "SELECT (SELECT to_jsonb(t)::text FROM \"{schema}\".tasks t WHERE task_id = 'T-000'),
                (SELECT string_agg(box || '/' || file, ',' ORDER BY box, file) FROM \"{schema}\".messages),
                (SELECT last FROM \"{schema}\".feed),
                (SELECT count(*) FROM \"{schema}\".grants)"
    ))
}

/// Move the waiting tickets to LOGS by hand, claim T-000 with `claim` (the conflict's
/// message and hint, or `None` when it went through): refused, saying where it looked and
/// what to do, changing nothing. Put back, the same claim goes through (the check is not refusing everything).
fn refused_then_put_back(c: &Cluster, schema: &str, mut claim: impl FnMut() -> Option<String>) {
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'logs' WHERE box = 'new'"));
    let before = state(c, schema);
    let refused = claim().expect("the claim is refused");
    assert!(refused.contains("is not in"), "says where the message was looked for: {refused}");
    assert!(refused.contains("circe doctor"), "says what to do: {refused}");
    assert_eq!(state(c, schema), before, "the refused claim changed nothing");
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'new' WHERE box = 'logs'"));
    assert_eq!(claim(), None, "the claim goes through once the message is back");
    assert_ne!(state(c, schema), before, "the claim changed the task");
}

#[test]
fn a_claim_whose_message_was_moved_by_hand_exits_4_and_changes_nothing() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 1);
    root.open_tasks(1);
    refused_then_put_back(c, &schema_of(&url), || {
        let out = root.run(Some("e1"), &["claim", "T-000", "--json"]);
        match out.code {
            0 => None,
            4 => {
                Some(format!("{} {}", out.json()["error"]["message"], out.json()["error"]["hint"]))
            }
            code => panic!("exit {code}: {} {}", out.stdout, out.stderr),
        }
    });
}

#[test]
fn on_a_warm_connection_too_a_refused_claim_changes_nothing() {
    use circe::engine::RootSpec;
    use circe::names::TaskId;
    let c = need_pg!();
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 1);
    root.open_tasks(2);
    let ws = circe::workspace::Workspace::open(&RootSpec::Url(url.clone())).unwrap();
    let (me, role) = ws.agent(Some("e1")).unwrap();
    // A first change on the connection (by the plain statement): the next goes through
    // `commit_task`.
    circe::ops::claim(&ws, &me, &role, &TaskId::new("T-001").unwrap(), None).unwrap();
    let t0 = TaskId::new("T-000").unwrap();
    refused_then_put_back(c, &schema_of(&url), || {
        match circe::ops::claim(&ws, &me, &role, &t0, None) {
            Ok(_) => None,
            Err(e) if e.kind == circe::error::Kind::Conflict => {
                Some(format!("{} {}", e.chain(), e.hint.unwrap_or_default()))
            }
            Err(e) => panic!("{}", e.chain()),
        }
    });
}
