//! Schema versions: a root made at version 2 (by a circe before TX state; a test build plays
//! it with `pg-schema-v2`) is refused by this circe until `circe init` migrates it, in one
//! transaction, keeping its agents, messages and tasks; then TX works on it.

use std::io::Write;
use std::process::Stdio;

use crate::common::{Out, Root};

fn send(root: &Root, agent: &str, text: &str, brk: Option<&str>) -> Out {
    let mut c = root.command(Some(agent), &["send", "--file", "-"]);
    c.stdin(Stdio::piped());
    if let Some(b) = brk {
        c.env("CIRCE_TEST_BREAK", b);
    }
    let mut child = c.spawn().expect("spawn circe");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    Out::from(&child.wait_with_output().unwrap())
}

#[test]
fn circe_init_migrates_a_version_2_root_to_version_3() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let mut old = Root::at(&url);
    old.env.push(("CIRCE_TEST_BREAK".into(), "pg-schema-v2".into()));
    old.run(None, &["init", "--clock", "client"]).ok();
    old.run(None, &["agent", "add", "e1", "--role", "engineer"]).ok();
    let task = "---\nto: e1\ntype: task\nmsg-id: old-1\n---\n\nkept\n";
    send(&old, "coordinator", task, None).ok();
    let version = |c: &crate::pg_cluster::Cluster| {
        c.psql(&format!("SELECT value FROM \"{schema}\".meta WHERE key = 'schema_version'"))
    };
    assert_eq!(version(c).trim(), "2");
    assert!(!c.psql(&format!("SELECT to_regclass('\"{schema}\".asks')")).contains("asks"));

    let root = Root::at(&url);
    let o = root.run(None, &["tasks"]);
    assert_eq!(o.code, 3, "{o:?}");
    assert!(o.stderr.contains("schema version 2") && o.stderr.contains("circe init"), "{o:?}");
    root.run(None, &["init"]).ok();
    assert_eq!(version(c).trim(), "3");
    // What the old root held is there, and what version 3 adds works on it.
    let tasks = root.run(None, &["tasks", "--json"]).ok().json();
    assert!(tasks.to_string().contains("old-1"), "{tasks}");
    root.run(Some("e1"), &["claim", "old-1"]).ok();
    let ask = "---\nto: e1\ntype: ask\nmsg-id: ask-1\ndeadline: 2030-01-01T00:00:00Z\n---\n?\n";
    send(&root, "coordinator", ask, None).ok();
    let asks = root.run(None, &["asks", "--json"]).ok().json();
    assert_eq!(asks["asks"][0]["msg_id"], "ask-1", "{asks}");
    let late = "---\nto: e1\ntype: task\nmsg-id: d-1\ndeadline: 2030-01-01T00:00:00Z\n---\n\nx\n";
    send(&root, "coordinator", late, None).ok();
    // A second init changes nothing.
    root.run(None, &["init"]).ok();
    assert_eq!(version(c).trim(), "3");
}
