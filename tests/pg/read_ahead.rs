//! A claim's commit answers with the message it moved, so that the summary the claim
//! shows costs no further round trip. That answer must be what a read would have said at
//! the commit (capped the same way), answer the very next read of that message only, and
//! never a read of another message.

use circe::boxes::Mailbox;
use circe::engine::RootSpec;
use circe::names::TaskId;
use circe::workspace::Workspace;

use crate::common::Root;

/// A root with tasks T-000.. waiting, each with its own summary, and a workspace on it.
fn root_with(c: &crate::pg_cluster::Cluster, n: usize) -> (Root, String) {
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 1);
    for i in 0..n {
        let id = format!("T-{i:03}");
        root.run(
            Some("coordinator"),
            &[
                "send",
                "--to",
                "all",
                "--intent",
                "implement_feature",
                "--task",
                &id,
                "--summary",
                &format!("the summary of {id}"),
            ],
        )
        .ok();
    }
    let schema = url.rsplit_once("schema=").map(|(_, s)| s.to_string()).unwrap();
    (root, schema)
}

#[test]
fn a_claim_shows_the_summary_of_the_message_it_took() {
    let c = need_pg!();
    let (root, _) = root_with(c, 2);
    for i in 0..2 {
        let out = root.run(Some("e1"), &["claim", "--next", "--json"]);
        out.ok();
        let j = out.json();
        let task = j["task_id"].as_str().unwrap().to_string();
        assert_eq!(j["summary"], format!("the summary of {task}"), "claim {i}: {}", out.stdout);
    }
}

#[test]
fn the_message_read_ahead_answers_once_as_a_read_would() {
    let c = need_pg!();
    let (root, schema) = root_with(c, 1);
    let ws = Workspace::open(&RootSpec::Url(root.url.clone())).unwrap();
    let (me, role) = ws.agent(Some("e1")).unwrap();
    let o = circe::ops::claim(&ws, &me, &role, &TaskId::new("T-000").unwrap(), None).unwrap();
    let mailbox = Mailbox::from_label(&o.location).unwrap();
    // Change the message's bytes behind the engine's back: a read from the database now
    // says so, the answer read ahead does not.
    let hex = c.psql(&format!(
        "SELECT encode(body, 'hex') FROM \"{schema}\".messages WHERE file = '{}'",
        o.message
    ));
    let before: Vec<u8> = (0..hex.trim().len() / 2)
        .map(|i| u8::from_str_radix(&hex.trim()[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert!(String::from_utf8_lossy(&before).contains("the summary of T-000"));
    c.psql(&format!(
        "UPDATE \"{schema}\".messages SET body = 'changed' WHERE file = '{}'",
        o.message
    ));
    let ahead = ws.engine.read_message_capped(&mailbox, &o.message, 10).unwrap();
    assert_eq!(ahead.bytes, before[..11], "capped as a read is");
    assert_eq!(ahead.size, Some(before.len() as u64), "with the whole size");
    let again = ws.engine.read_message(&mailbox, &o.message).unwrap();
    assert_eq!(again, b"changed", "the second read goes to the database");
}

#[test]
fn the_message_read_ahead_never_answers_for_another() {
    let c = need_pg!();
    let (root, schema) = root_with(c, 1);
    let ws = Workspace::open(&RootSpec::Url(root.url.clone())).unwrap();
    let (me, role) = ws.agent(Some("e1")).unwrap();
    let o = circe::ops::claim(&ws, &me, &role, &TaskId::new("T-000").unwrap(), None).unwrap();
    let mailbox = Mailbox::from_label(&o.location).unwrap();
    c.psql(&format!(
        "UPDATE \"{schema}\".messages SET body = 'changed' WHERE file = '{}'",
        o.message
    ));
    // The same name in another box is another message: not found there.
    let other = ws.engine.read_message(&Mailbox::NewMessages, &o.message);
    assert!(other.is_err(), "no message of that name waits in NEW_MESSAGES");
    // That read used up what was read ahead: this one asks the database.
    let read = ws.engine.read_message(&mailbox, &o.message).unwrap();
    assert_eq!(read, b"changed");
}
