//! Sequence numbers through the operations, on both engines (shared/reference 003).

use super::*;
use crate::seq::{Counter, MessageState};

/// A plain message from `from` to `to` (an agent, a role or `all`).
fn inform(ws: &Workspace, from: &str, to: &str, text: &str) -> Delivery {
    let mut m = Message::new(Format::Circe);
    m.to = Some(to.into());
    m.intent = Some("inform".into());
    m.body = format!("## Summary\n{text}\n");
    send(ws, &a(from), m).unwrap()
}

/// The seq, epoch and msg_id of a delivered copy.
fn numbered(ws: &Workspace, d: &Delivery, copy: usize) -> (Option<u64>, Option<u64>, String) {
    let c = &d.delivered[copy];
    let b = Mailbox::from_label(&c.mailbox).unwrap();
    let m = crate::message::parse_bytes(
        &ws.engine.read_message(&b, &c.file).unwrap(),
        crate::message::Mode::Draft,
    )
    .unwrap();
    (m.seq, m.seq_epoch, m.msg_id.unwrap())
}

fn counter(ws: &Workspace, who: &str) -> Counter {
    ws.engine
        .seq_counters()
        .unwrap()
        .into_iter()
        .find(|(x, _)| x.as_str() == who)
        .map_or_else(Counter::default, |(_, c)| c)
}

on_both_engines! {
    /// One counter per sender whatever the address: a message, a broadcast (every copy the
    /// same number) and a task message take 1, 2, 3; other senders count on their own.
    fn one_counter_per_sender(ws) {
        let d1 = inform(ws, "coordinator", "engineer", "one");
        let d2 = inform(ws, "coordinator", "all", "two");
        open(ws, "T1", None);
        let d4 = inform(ws, "qa", "engineer", "qa's first");
        assert_eq!(numbered(ws, &d1, 0).0, Some(1));
        assert!(d2.delivered.len() > 2);
        for i in 0..d2.delivered.len() {
            assert_eq!(numbered(ws, &d2, i).0, Some(2), "every copy of the broadcast is #2");
        }
        let ticket = ws.engine.peek(&id("T1")).unwrap().unwrap().rec.message;
        let t = crate::message::parse_bytes(&ws.engine.read_message(&Mailbox::NewMessages, &ticket).unwrap(), crate::message::Mode::Draft).unwrap();
        assert_eq!(t.seq, Some(3));
        assert_eq!(numbered(ws, &d4, 0).0, Some(1));
        assert_eq!(counter(ws, "coordinator"), Counter { epoch: 0, last: 3 });
    }

    /// A number counts only when its message is delivered: a refused send and a hold
    /// dropped without a delivery use none; a draft that brings its own number is refused.
    fn only_a_delivery_uses_a_number(ws) {
        let mut m = Message::new(Format::Circe);
        m.to = Some("nobody".into());
        m.intent = Some("inform".into());
        assert_eq!(send(ws, &a("coordinator"), m).unwrap_err().kind, Kind::NotFound);
        {
            let hold = ws.engine.seq_hold(&a("coordinator")).unwrap();
            assert_eq!(hold.next(), Counter { epoch: 0, last: 1 });
            assert!(!hold.used());
        }
        let mut m = Message::new(Format::Circe);
        m.to = Some("engineer".into());
        m.intent = Some("inform".into());
        m.seq = Some(9);
        assert_eq!(send(ws, &a("coordinator"), m).unwrap_err().kind, Kind::Refused);
        let d = inform(ws, "coordinator", "engineer", "first delivered");
        assert_eq!(numbered(ws, &d, 0).0, Some(1));
    }

    /// The gap rule: #5 and #7 in the INBOX; taking #7 first makes #5 stale: kept, judged
    /// stale, logged as skipped once; #8 is new again.
    fn taking_a_newer_message_makes_the_older_stale(ws) {
        let mut d = Vec::new();
        for i in 1..=7 {
            let to = if i == 5 || i == 7 { "engineer" } else { "qa" };
            d.push(inform(ws, "coordinator", to, &format!("#{i}")));
        }
        let eng = a("engineer");
        let f5 = d[4].delivered[0].file.clone();
        let f7 = d[6].delivered[0].file.clone();
        take(ws, &eng, &f7).unwrap();
        seq::handed_on(ws, &eng, &[(Mailbox::Workspace(eng.clone()), f7)]).unwrap();
        let inbox = Mailbox::Inbox(eng.clone());
        assert_eq!(ws.engine.list_box(&inbox).unwrap(), std::slice::from_ref(&f5), "kept, never deleted");
        let m5 = read(ws, &inbox, &f5).unwrap();
        let judge = seq::Staleness::of(ws, &eng).unwrap();
        assert_eq!(judge.stale(ws, &m5, &f5), Some(7));
        let skips: Vec<_> = ws.engine.read_events(Cursor::START, 100).unwrap().into_iter().filter(|e| e.event == EventKind::Skip).collect();
        assert_eq!(skips.len(), 1);
        assert_eq!((skips[0].seq, skips[0].last_seen, skips[0].files[0].file.as_str()), (Some(5), Some(7), f5.as_str()));
        // Listing it again logs nothing more.
        seq::log_stale(ws, &eng, &[(&f5, &m5)]).unwrap();
        let n = ws.engine.read_events(Cursor::START, 100).unwrap().iter().filter(|e| e.event == EventKind::Skip).count();
        assert_eq!(n, 1);
        let d8 = inform(ws, "coordinator", "engineer", "#8");
        let m8 = read(ws, &inbox, &d8.delivered[0].file).unwrap();
        assert_eq!(judge.stale(ws, &m8, &d8.delivered[0].file), None);
        assert_eq!(ws.engine.seq_seen(&eng).unwrap().last_seen("COORDINATOR"), 7);
    }

    /// A reset starts a new epoch: the next message is #1 with seq_epoch 1, taken as new by a
    /// receiver that saw #2, while the old epoch's messages stay stale.
    fn a_reset_starts_an_epoch_receivers_accept(ws) {
        let eng = a("engineer");
        let old1 = inform(ws, "coordinator", "engineer", "old 1");
        let old2 = inform(ws, "coordinator", "engineer", "old 2");
        take(ws, &eng, &old2.delivered[0].file).unwrap();
        seq::handed_on(ws, &eng, &[(Mailbox::Workspace(eng.clone()), old2.delivered[0].file.clone())]).unwrap();
        let c = seq_state::reset(ws, &a("coordinator")).unwrap();
        ws.pin_clock(t(1));
        assert_eq!(c, Counter { epoch: 1, last: 0 });
        let new1 = inform(ws, "coordinator", "engineer", "new 1");
        assert_eq!(numbered(ws, &new1, 0).0, Some(1));
        assert_eq!(numbered(ws, &new1, 0).1, Some(1));
        let inbox = Mailbox::Inbox(eng.clone());
        let judge = seq::Staleness::of(ws, &eng).unwrap();
        let (f_new, f_old) = (&new1.delivered[0].file, &old1.delivered[0].file);
        assert_eq!(judge.stale(ws, &read(ws, &inbox, f_new).unwrap(), f_new), None);
        assert_eq!(judge.stale(ws, &read(ws, &inbox, f_old).unwrap(), f_old), Some(2));
        take(ws, &eng, &new1.delivered[0].file).unwrap();
        seq::handed_on(ws, &eng, &[(Mailbox::Workspace(eng.clone()), new1.delivered[0].file.clone())]).unwrap();
        let seen = ws.engine.seq_seen(&eng).unwrap();
        assert_eq!((seen.senders["COORDINATOR"].epoch, seen.last_seen("COORDINATOR")), (1, 1));
    }

    /// `seq state` in the reference's shape, and `seq import`: up only, names must be agents,
    /// and a refused import changes nothing.
    fn state_and_import(ws) {
        inform(ws, "coordinator", "engineer", "x");
        let (s, _) = seq_state::state(ws).unwrap();
        assert_eq!(s.render(), "{\n  \"counters\": {\n    \"COORDINATOR\": 1\n  },\n  \"lastSeen\": {}\n}\n");
        let file = MessageState::parse(r#"{"counters": {"COORDINATOR": 5, "QA": 2}, "lastSeen": {"ENGINEER": {"COORDINATOR": 4}}}"#).unwrap();
        let done = seq_state::import(ws, &file).unwrap();
        assert_eq!((done.counters_moved, done.last_seen_moved), (2, 1));
        assert_eq!(counter(ws, "coordinator").last, 5);
        assert_eq!(ws.engine.seq_seen(&a("engineer")).unwrap().last_seen("COORDINATOR"), 4);
        let d = inform(ws, "coordinator", "engineer", "after the import");
        assert_eq!(numbered(ws, &d, 0).0, Some(6));
        // The first message (#1) is now stale for the engineer, and was logged so.
        let skips = ws.engine.read_events(Cursor::START, 100).unwrap().into_iter().filter(|e| e.event == EventKind::Skip).count();
        assert_eq!(skips, 1);
        let back = MessageState::parse(r#"{"counters": {"COORDINATOR": 2}, "lastSeen": {}}"#).unwrap();
        assert_eq!(seq_state::import(ws, &back).unwrap_err().kind, Kind::Refused);
        let stranger = MessageState::parse(r#"{"counters": {"WORKER-A": 2}, "lastSeen": {}}"#).unwrap();
        assert_eq!(seq_state::import(ws, &stranger).unwrap_err().kind, Kind::NotFound);
        assert_eq!(counter(ws, "coordinator").last, 6);
    }

    /// The state circe printed, imported back after a sender's reset, changes nothing: a
    /// receiver's lastSeen of the sender's earlier epoch is not lifted into the new one (its
    /// next messages would all be stale). A reset sender's lastSeen above what it numbered
    /// since is left so; one within it moves up.
    fn importing_the_state_back_after_a_reset_changes_nothing(ws) {
        let eng = a("engineer");
        for n in 0..3 {
            let d = inform(ws, "coordinator", "engineer", &format!("old {n}"));
            take(ws, &eng, &d.delivered[0].file).unwrap();
            seq::handed_on(ws, &eng, &[(Mailbox::Workspace(eng.clone()), d.delivered[0].file.clone())]).unwrap();
        }
        seq_state::reset(ws, &a("coordinator")).unwrap();
        let (printed, _) = seq_state::state(ws).unwrap();
        let before = ws.engine.seq_seen(&eng).unwrap();
        let done = seq_state::import(ws, &MessageState::parse(&printed.render()).unwrap()).unwrap();
        assert_eq!((done.counters_moved, done.last_seen_moved, done.earlier_epoch_count), (0, 0, 1));
        assert_eq!(ws.engine.seq_seen(&eng).unwrap(), before);
        let d = inform(ws, "coordinator", "engineer", "new 1");
        let judge = seq::Staleness::of(ws, &eng).unwrap();
        let f = &d.delivered[0].file;
        assert_eq!(judge.stale(ws, &read(ws, &Mailbox::Inbox(eng.clone()), f).unwrap(), f), None);
        // Numbers the reset sender has reached in its new epoch move up as before.
        inform(ws, "coordinator", "engineer", "new 2");
        let file = MessageState::parse(r#"{"counters": {}, "lastSeen": {"ENGINEER": {"COORDINATOR": 2}}}"#).unwrap();
        let done = seq_state::import(ws, &file).unwrap();
        assert_eq!((done.last_seen_moved, done.earlier_epoch_count), (1, 0));
        let seen = ws.engine.seq_seen(&eng).unwrap();
        assert_eq!((seen.senders["COORDINATOR"].epoch, seen.last_seen("COORDINATOR")), (1, 2));
    }
}
