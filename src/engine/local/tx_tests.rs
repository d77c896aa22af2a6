//! The task transaction's commit refuses what did not happen.

use crate::engine::local::testing::{Root, agent, id};

/// A commit whose ticket is gone from where the transaction saw it (moved behind its back:
/// by hand, or by a command that did not hold the lock) fails as a conflict, and reports no
/// move: nothing is written, no event logged.
#[test]
fn a_move_that_did_not_happen_is_an_error() {
    use crate::boxes::Mailbox;
    use crate::engine::Engine;
    use crate::task::{Change, Ticket};
    let (_d, r) = Root::new(&["coordinator", "engineer"]);
    r.open("M-1");
    r.claim("engineer", "M-1");
    let mut tx = r.eng.begin(&id("M-1"), false).unwrap().unwrap();
    let st = tx.state().unwrap().clone();
    let inbox = r.eng.store.message_path(&Mailbox::Inbox(agent("engineer")), &st.rec.message);
    std::fs::rename(&inbox, r.eng.store.root().join("elsewhere.md")).unwrap();
    let events_before = r.eng.last_event_id().unwrap();
    let take = Change {
        op: "take",
        record: st.rec.clone(),
        checks: None,
        ticket: Ticket::MoveTo(Mailbox::Workspace(agent("engineer"))),
        events: vec![crate::event::Event::now(crate::event::EventKind::Take, "engineer")],
        notices: Vec::new(),
        outbox: Vec::new(),
        request: None,
    };
    let e = tx.commit(take).unwrap_err();
    assert_eq!(e.kind, crate::error::Kind::Conflict, "{}", e.message);
    assert_eq!(r.eng.last_event_id().unwrap(), events_before, "no event for a move not made");
}

/// A journal cut off before its mark (the line written, the `J` not) is no journal: the next
/// transaction on the task settles nothing and empties the lock file, so an idle lock file
/// stays empty.
#[test]
fn an_unmarked_journal_is_emptied_by_the_next_holder() {
    use crate::engine::Engine;
    let (_d, r) = Root::new(&["coordinator", "engineer"]);
    r.open("M-1");
    let lock = r.eng.store.root().join("locks/task-M-1.lock");
    let events_before = r.eng.last_event_id().unwrap();
    std::fs::write(&lock, b"\0{\"after\":1,\"record\":\"x\",\"events\":[],\"sends\":[]}\n")
        .unwrap();
    drop(r.eng.begin(&id("M-1"), false).unwrap().unwrap());
    assert_eq!(std::fs::metadata(&lock).unwrap().len(), 0, "the lock file is empty again");
    assert_eq!(r.eng.last_event_id().unwrap(), events_before, "nothing logged");
}
