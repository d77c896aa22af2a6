//! Every example of the sequence protocol (shared/reference 003) with its outcome.

use super::*;

const EXCHANGE: &str = "(LEAD #1): Hey team, starting comms check
(WORKER-A #1): Lead, I'm online
(REVIEWER #1): Confirmed, ready to review
(LEAD #2): Great, let's discuss the new feature
(WORKER-A #2): I have a question about that";

const STATE: &str = r#"{
  "counters": {
    "LEAD": 5,
    "WORKER-A": 3,
    "WORKER-B": 2,
    "REVIEWER": 4
  },
  "lastSeen": {
    "LEAD": { "WORKER-A": 3, "WORKER-B": 2, "REVIEWER": 4 },
    "WORKER-A": { "LEAD": 5, "WORKER-B": 2, "REVIEWER": 4 },
    "WORKER-B": { "LEAD": 5, "WORKER-A": 3, "REVIEWER": 4 },
    "REVIEWER": { "LEAD": 5, "WORKER-A": 3, "WORKER-B": 2 }
  }
}
"#;

#[test]
fn the_five_line_exchange_is_all_processed() {
    let mut r = Receiver::default();
    let mut seen = Vec::new();
    for l in EXCHANGE.lines() {
        let m = parse_line(l).unwrap();
        seen.push((m.role.clone(), m.seq));
        assert_eq!(r.receive(&m.role, m.seq, 0), Verdict::Process, "{l}");
        assert_eq!(render_line(&m.role, m.seq, &m.text), l);
    }
    assert_eq!(
        seen,
        [
            ("LEAD".to_string(), Some(1)),
            ("WORKER-A".into(), Some(1)),
            ("REVIEWER".into(), Some(1)),
            ("LEAD".into(), Some(2)),
            ("WORKER-A".into(), Some(2)),
        ]
    );
    assert_eq!((r.last_seen("LEAD"), r.last_seen("WORKER-A"), r.last_seen("REVIEWER")), (2, 2, 1));
    // Arriving again (crossed in transit), every one of them is stale.
    for l in EXCHANGE.lines() {
        let m = parse_line(l).unwrap();
        assert!(matches!(r.receive(&m.role, m.seq, 0), Verdict::Stale { .. }), "{l}");
    }
}

#[test]
fn a_gap_processes_7_and_skips_a_late_5() {
    let mut r = Receiver::default();
    assert_eq!(r.receive("LEAD", Some(5), 0), Verdict::Process);
    assert_eq!(r.receive("LEAD", Some(7), 0), Verdict::Process);
    assert_eq!(r.receive("LEAD", Some(5), 0), Verdict::Stale { last_seen: 7 });
    assert_eq!(r.receive("LEAD", Some(6), 0), Verdict::Stale { last_seen: 7 });
    assert_eq!(r.receive("LEAD", Some(7), 0), Verdict::Stale { last_seen: 7 });
    assert_eq!(r.receive("LEAD", Some(8), 0), Verdict::Process);
}

#[test]
fn a_missing_number_is_0_and_always_processed() {
    let mut r = Receiver::default();
    let m = parse_line("(LEAD): old client, no number").unwrap();
    assert_eq!((m.role.as_str(), m.seq, m.text.as_str()), ("LEAD", None, "old client, no number"));
    assert_eq!(r.receive(&m.role, Some(9), 0), Verdict::Process);
    for _ in 0..2 {
        assert_eq!(r.receive(&m.role, m.seq, 0), Verdict::Process);
        assert_eq!(r.receive(&m.role, Some(0), 0), Verdict::Process);
    }
    assert_eq!(r.last_seen("LEAD"), 9);
}

#[test]
fn an_unknown_sender_starts_at_0() {
    let mut r = Receiver::default();
    assert_eq!(r.last_seen("NEWBIE"), 0);
    assert_eq!(r.receive("NEWBIE", Some(1), 0), Verdict::Process);
    // Roles are compared without case.
    assert_eq!(r.receive("newbie", Some(1), 0), Verdict::Stale { last_seen: 1 });
}

#[test]
fn a_manual_reset_clears_state_and_epochs_accept_a_new_1() {
    let mut r = Receiver::default();
    assert_eq!(r.receive("LEAD", Some(5), 0), Verdict::Process);
    assert_eq!(r.receive("LEAD", Some(1), 0), Verdict::Stale { last_seen: 5 });
    // Option C: the receiver's state is cleared on a fresh start.
    r.reset();
    assert_eq!(r.receive("LEAD", Some(1), 0), Verdict::Process);
    // Epochs: the sender was reset (epoch 1) while the receiver kept its state.
    let mut lead = Counter { epoch: 0, last: 5 };
    let mut r = Receiver::default();
    assert_eq!(r.receive("LEAD", Some(5), lead.epoch), Verdict::Process);
    lead.reset().unwrap();
    assert_eq!((lead.epoch, lead.next_seq()), (1, 1));
    assert_eq!(r.receive("LEAD", Some(1), lead.epoch), Verdict::Process);
    // A late message of the old epoch is stale, whatever its number.
    assert_eq!(r.receive("LEAD", Some(6), 0), Verdict::Stale { last_seen: 1 });
    assert_eq!(r.receive("LEAD", Some(2), 1), Verdict::Process);
}

#[test]
fn a_broadcast_uses_the_one_counter() {
    let mut lead = Counter::default();
    // LEAD -> WORKER-A #1, LEAD -> all #2, LEAD -> WORKER-B #3.
    let sent: Vec<u64> = (0..3).map(|_| lead.next_seq()).collect();
    assert_eq!(sent, [1, 2, 3]);
    // WORKER-B sees only #2 (the broadcast) and #3: both processed, the gap is fine.
    let mut b = Receiver::default();
    assert_eq!(b.receive("LEAD", Some(2), 0), Verdict::Process);
    assert_eq!(b.receive("LEAD", Some(3), 0), Verdict::Process);
    // WORKER-A sees #1 and #2; #1 arriving late after #2 is stale.
    let mut a = Receiver::default();
    assert_eq!(a.receive("LEAD", Some(2), 0), Verdict::Process);
    assert_eq!(a.receive("LEAD", Some(1), 0), Verdict::Stale { last_seen: 2 });
}

#[test]
fn line_forms() {
    let m = parse_line("(WORKER-A-2 #3): hi").unwrap();
    assert_eq!((m.role.as_str(), m.seq, m.text.as_str()), ("WORKER-A-2", Some(3), "hi"));
    assert_eq!(parse_line("(lead #18446744073709551615):x").unwrap().seq, Some(u64::MAX));
    assert_eq!(parse_line("(lead #1): x").unwrap().role_key(), "LEAD");
    for bad in [
        "(ORACLE 123): x",
        "[ORACLE #123]: x",
        "(ORACLE #123) x",
        "(ORACLE #123)",
        "(ORACLE #): x",
        "(ORACLE #1x): x",
        "(ORACLE #-1): x",
        "(ORACLE #18446744073709551616): x",
        "(-LEAD #1): x",
        "(LEAD- #1): x",
        "(LE AD #1): x",
        "(): x",
        " (LEAD #1): x",
    ] {
        assert_eq!(parse_line(bad), None, "{bad}");
    }
    assert_eq!(render_line("LEAD", None, "x"), "(LEAD): x");
}

#[test]
fn message_state_round_trips_the_reference_example_exactly() {
    let s = MessageState::parse(STATE).unwrap();
    assert_eq!(s.render(), STATE);
    let keys: Vec<&str> = s.counters.0.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["LEAD", "WORKER-A", "WORKER-B", "REVIEWER"]);
    // The example is consistent: what each agent last saw of X is X's own counter.
    for (agent, seen) in &s.last_seen.0 {
        assert!(seen.get(agent).is_none(), "{agent} tracks itself");
        for (sender, n) in &seen.0 {
            assert_eq!(s.counters.get(sender), Some(n), "{agent} saw {sender}");
        }
    }
    let worker_b = s.receiver("WORKER-B");
    assert_eq!(worker_b.last_seen("LEAD"), 5);
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        serde_json::from_str::<serde_json::Value>(STATE).unwrap()
    );
    assert!(MessageState::parse(r#"{"counters": {"A": 1, "A": 2}, "lastSeen": {}}"#).is_err());
    // Names are agents, read without case: one agent named twice is refused too.
    let e = MessageState::parse(r#"{"counters": {"QA": 1, "qa": 2}, "lastSeen": {}}"#).unwrap_err();
    assert!(e.to_string().contains("duplicate key `qa` (as `QA`"), "{e}");
    let e = MessageState::parse(r#"{"counters": {}, "lastSeen": {"QA": {"A": 1, "a": 2}}}"#);
    assert!(e.is_err());
    assert_eq!(MessageState::default().render(), "{\n  \"counters\": {},\n  \"lastSeen\": {}\n}\n");
}

#[test]
fn an_epoch_after_the_number_is_circes_form() {
    let m = parse_line("(LEAD #1 e2): after the reset").unwrap();
    assert_eq!((m.seq, m.epoch, m.text.as_str()), (Some(1), 2, "after the reset"));
    assert_eq!(parse_line("(LEAD #4): x").unwrap().epoch, 0);
    assert_eq!(render_numbered("LEAD", Some(1), 2, "x"), "(LEAD #1 e2): x");
    assert_eq!(render_numbered("LEAD", Some(1), 0, "x"), "(LEAD #1): x");
    for bad in ["(LEAD #1 2): x", "(LEAD #1 e): x", "(LEAD #1 ex): x", "(LEAD #1 e2 ): x"] {
        assert_eq!(parse_line(bad), None, "{bad}");
    }
}

#[test]
fn judging_changes_nothing_and_the_message_that_set_last_seen_is_not_stale() {
    let mut r = Receiver::default();
    assert_eq!(r.hand_on("LEAD", Some(5), 0, "m5"), Verdict::Process);
    // #5 itself (still in the INBOX after a watcher handed it on) is not stale; another #5 is.
    assert_eq!(r.judge("LEAD", Some(5), 0, Some("m5")), Verdict::Process);
    assert_eq!(r.judge("LEAD", Some(5), 0, Some("other")), Verdict::Stale { last_seen: 5 });
    assert_eq!(r.judge("LEAD", Some(4), 0, Some("m4")), Verdict::Stale { last_seen: 5 });
    assert_eq!(r.judge("LEAD", Some(6), 0, None), Verdict::Process);
    assert_eq!(r.last_seen("LEAD"), 5);
    // Handed on twice (taken, then done): processed, nothing moves.
    assert_eq!(r.receive_msg("LEAD", Some(5), 0, Some("m5")), Verdict::Process);
    assert_eq!(r.senders["LEAD"].msg_id.as_deref(), Some("m5"));
    assert_eq!(r.hand_on("LEAD", Some(7), 0, "m7"), Verdict::Process);
    // #5 was handed on: seen, not stale, however far lastSeen went since; another #5 is.
    assert_eq!(r.judge("LEAD", Some(5), 0, Some("m5")), Verdict::Process);
    assert_eq!(r.judge("LEAD", Some(5), 0, Some("other")), Verdict::Stale { last_seen: 7 });
    assert_eq!(r.judge("LEAD", Some(6), 0, Some("m6")), Verdict::Stale { last_seen: 7 });
    // Once it has left (taken, filed: `ops::seq` drops it), a copy arriving again is stale.
    r.keep_handed(Some("lead"), &|id| id != "m5");
    assert_eq!(r.judge("LEAD", Some(5), 0, Some("m5")), Verdict::Stale { last_seen: 7 });
    // A chat line is no INBOX message: received, it is not remembered once passed.
    assert_eq!(r.receive_msg("LEAD", Some(8), 0, Some("chat:3")), Verdict::Process);
    assert_eq!(r.receive_msg("LEAD", Some(9), 0, Some("chat:4")), Verdict::Process);
    assert_eq!(r.judge("LEAD", Some(8), 0, Some("chat:3")), Verdict::Stale { last_seen: 9 });
}

#[test]
fn a_send_whose_counter_moved_is_numbered_again_three_times_in_all() {
    use crate::error::Error;
    let mut calls = 0;
    let r = super::numbered_again("e1", || {
        calls += 1;
        if calls < 3 { Err(super::counter_moved("e1")) } else { Ok(calls) }
    });
    assert_eq!(r.unwrap(), 3);
    let mut calls = 0;
    let r: crate::error::Result<()> = super::numbered_again("e1", || {
        calls += 1;
        Err(super::counter_moved("e1"))
    });
    let e = r.unwrap_err();
    assert!(super::is_counter_moved(&e, "e1") && calls == super::TRIES, "{calls} tries");
    assert_eq!(e.exit_code(), 4);
    // Another sender's refusal, or any other error, is not tried again.
    let mut calls = 0;
    let r: crate::error::Result<()> = super::numbered_again("e1", || {
        calls += 1;
        Err(super::counter_moved("circe"))
    });
    assert!(r.is_err() && calls == 1);
    let mut calls = 0;
    let r: crate::error::Result<()> = super::numbered_again("e1", || {
        calls += 1;
        Err(Error::conflict("task T1 changed meanwhile"))
    });
    assert!(r.is_err() && calls == 1);
}

#[test]
fn a_counter_in_its_last_epoch_is_not_reset() {
    let mut c = Counter { epoch: u64::MAX, last: 5 };
    assert_eq!(c.reset(), None);
    assert_eq!(c, Counter { epoch: u64::MAX, last: 5 }, "unchanged");
}
