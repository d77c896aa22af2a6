//! A send's delivery and its events commit in one transaction: a send killed between the
//! two (`send.logging`) leaves neither, and its retry (the same id) delivers it once with one
//! `send` event. Shown failing with `no-journal` (no transaction: the message is delivered
//! and its event lost).

use crate::common::{Out, Root};

/// Kill a send to all at `send.logging` (with `brk` broken); returns what went wrong.
fn cut_off_send(brk: Option<&str>) -> Vec<String> {
    let Some(c) = crate::common::cluster() else {
        return vec!["a delivery and its events parted (skipped: no PostgreSQL)".into()];
    };
    let root = Root::new(&c.fresh_url(), "client", 2);
    let args = ["send", "--to", "all", "--intent", "inform", "--summary", "x", "--msg-id", "m-1"];
    let mut cmd = root.command(Some("coordinator"), &args);
    cmd.env("CIRCE_CRASH_AT", "send.logging");
    if let Some(b) = brk {
        cmd.env("CIRCE_TEST_BREAK", b);
    }
    let cut = Out::from(&cmd.output().expect("run circe"));
    assert_eq!(cut.code, circe::engine::local::CRASH_EXIT, "{cut:?}");
    let mut p = Vec::new();
    let copies = root.engine().find_msg_id("m-1").unwrap().len();
    let sends = |root: &Root| {
        root.events()
            .iter()
            .filter(|e| {
                e.event == circe::event::EventKind::Send && e.msg_id.as_deref() == Some("m-1")
            })
            .count()
    };
    if copies != 0 || sends(&root) != 0 {
        p.push(format!(
            "a delivery and its events parted: {copies} copies, {} events",
            sends(&root)
        ));
    }
    root.run(Some("coordinator"), &args).ok();
    let (copies, events) = (root.engine().find_msg_id("m-1").unwrap().len(), sends(&root));
    if (copies, events) != (7, 1) {
        p.push(format!("the retry left {copies} copies and {events} send events"));
    }
    p
}

#[test]
fn a_send_and_its_events_commit_together() {
    let p = cut_off_send(None);
    assert!(p.is_empty() || p[0].contains("skipped"), "{p:?}");
}

#[test]
fn the_send_checker_sees_a_delivery_apart_from_its_events() {
    if crate::common::cluster().is_none() {
        return;
    }
    let p = cut_off_send(Some("no-journal"));
    assert!(p.iter().any(|x| x.contains("parted")), "not caught: {p:?}");
}
