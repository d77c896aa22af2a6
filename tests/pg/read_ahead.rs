//! A claim's commit answers with the message it moved, so that the summary the claim
//! shows costs no further round trip. That answer must be what a read would have said at
//! the commit (capped the same way), answer the very next read of that message only, never
//! a read of another message, and be dropped by any later change this process makes.

use circe::boxes::Mailbox;
use circe::engine::RootSpec;
use circe::names::TaskId;
use circe::workspace::Workspace;

use crate::common::Root;

/// A root with tasks T-000.. waiting, each with its own summary, and a workspace on it.
fn root_with(c: &crate::pg_cluster::Cluster, n: usize) -> (Root, String) {
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 1);
    root.open_tasks_saying(n, |id| format!("the summary of {id}"));
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

/// The bytes of the message `file` as the database holds them.
fn bytes_of(c: &crate::pg_cluster::Cluster, schema: &str, file: &str) -> Vec<u8> {
    let hex = c.psql(&format!(
        "SELECT encode(body, 'hex') FROM \"{schema}\".messages WHERE file = '{file}'"
    ));
    let hex = hex.trim();
    (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect()
}

/// A claim made in this process, and what the tests look at after it.
struct Claimed {
    ws: Workspace,
    /// A second connection, opened before the claim, to change things behind its back.
    other: Box<dyn circe::engine::Engine>,
    /// The claimed message's box and name, and its bytes.
    mailbox: Mailbox,
    file: String,
    bytes: Vec<u8>,
    /// Another message in the same box: its name and bytes.
    neighbour: (String, Vec<u8>),
}

/// T-001 claimed by e1 in a process of its own (so e1's INBOX holds another message), then
/// T-000 claimed in this process.
fn claimed(c: &crate::pg_cluster::Cluster) -> Claimed {
    let (root, schema) = root_with(c, 2);
    let first = root.run(Some("e1"), &["claim", "T-001", "--json"]);
    let neighbour = first.ok().json()["message"]["file"].as_str().unwrap().to_string();
    let file = c.psql(&format!(
        "SELECT file FROM \"{schema}\".messages WHERE box = 'new' AND file LIKE '%T-000%'"
    ));
    let file = file.trim().to_string();
    let (bytes, n_bytes) = (bytes_of(c, &schema, &file), bytes_of(c, &schema, &neighbour));
    assert!(String::from_utf8_lossy(&bytes).contains("the summary of T-000"));
    let ws = Workspace::open(&RootSpec::Url(root.url.clone())).unwrap();
    let other = root.engine();
    let (me, role) = ws.agent(Some("e1")).unwrap();
    let o = circe::ops::claim(&ws, &me, &role, &TaskId::new("T-000").unwrap(), None).unwrap();
    assert_eq!(o.message, file);
    let mailbox = Mailbox::from_label(&o.location).unwrap();
    Claimed { ws, other, mailbox, file, bytes, neighbour: (neighbour, n_bytes) }
}

#[test]
fn the_message_read_ahead_answers_once_as_a_read_would() {
    let c = need_pg!();
    let t = claimed(c);
    // Another connection files the message away: a read from the database no longer finds
    // it where the claim left it; the answer read ahead still does, once.
    assert!(t.other.move_message(&t.mailbox, &Mailbox::Logs, &t.file).unwrap());
    let ahead = t.ws.engine.read_message_capped(&t.mailbox, &t.file, 10).unwrap();
    assert_eq!(ahead.bytes, t.bytes[..11], "capped as a read is");
    assert_eq!(ahead.size, Some(t.bytes.len() as u64), "with the whole size");
    let again = t.ws.engine.read_message(&t.mailbox, &t.file);
    assert!(again.is_err(), "the second read goes to the database: {again:?}");
}

#[test]
fn the_message_read_ahead_never_answers_for_another() {
    let c = need_pg!();
    let t = claimed(c);
    assert!(t.other.move_message(&t.mailbox, &Mailbox::Logs, &t.file).unwrap());
    // Another message in the same box reads as itself.
    let (name, bytes) = &t.neighbour;
    assert_eq!(&t.ws.engine.read_message(&t.mailbox, name).unwrap(), bytes);
    // That read used up what was read ahead: this one asks the database.
    assert!(t.ws.engine.read_message(&t.mailbox, &t.file).is_err());
    // The same name in another box is another message.
    let t = claimed(c);
    let there = t.ws.engine.read_message(&Mailbox::NewMessages, &t.file);
    assert!(there.is_err(), "no message of that name waits in NEW_MESSAGES");
}

#[test]
fn a_change_made_after_the_claim_drops_what_was_read_ahead() {
    let c = need_pg!();
    let t = claimed(c);
    // This process files the message away itself: the answer read ahead is gone with it.
    assert!(t.ws.engine.move_message(&t.mailbox, &Mailbox::Logs, &t.file).unwrap());
    assert!(t.ws.engine.read_message(&t.mailbox, &t.file).is_err());
    assert_eq!(t.ws.engine.read_message(&Mailbox::Logs, &t.file).unwrap(), t.bytes);
}
