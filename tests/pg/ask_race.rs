//! An ask's answer racing its expiry, from two clients at once: the answer (sent just before
//! the deadline) and `circe reap` (just after it). Exactly one wins: either the ask is
//! answered and the asker got the answer, or it expired and the asker got the expiry
//! notice; never both, never neither. Every other round the answer pauses between marking
//! the ask and delivering (`ask-slow-answer`) and `reap` comes in that pause: it must leave
//! an answer under way alone. Shown failing when the answer does not hold the ask
//! (`ask-unheld`): `reap` then takes the mark for a crashed answer, reopens and expires it.
//! And two recipients answering one ask at once: the asker gets exactly one answer, the one
//! the record names; shown failing when an ask's write compares no revision
//! (`pg-ask-nocas`).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::caught::until_caught;
use crate::common::{Out, Root};

/// What one round ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Round {
    /// The ask's state at the end (`answered`, `expired`, ...).
    state: String,
    answer_delivered: bool,
    notice_delivered: bool,
}

impl Round {
    fn consistent(&self) -> bool {
        match self.state.as_str() {
            "answered" => self.answer_delivered && !self.notice_delivered,
            "expired" => self.notice_delivered && !self.answer_delivered,
            _ => false,
        }
    }
}

/// `circe --agent AGENT send --file -` at `now`, with `text` on stdin (not yet waited for).
fn send_at(root: &Root, agent: &str, now: &str, text: &str) -> std::process::Child {
    send_at_with(root, agent, now, text, false)
}

/// `send_at`; `slow`: with a pause between an answer's mark and its delivery.
fn send_at_with(
    root: &Root,
    agent: &str,
    now: &str,
    text: &str,
    slow: bool,
) -> std::process::Child {
    let mut c: Command = root.command(Some(agent), &["send", "--file", "-"]);
    c.env("CIRCE_NOW", now).stdin(Stdio::piped());
    if slow {
        let breaks: Vec<&str> = root
            .env
            .iter()
            .filter(|(k, _)| k == "CIRCE_TEST_BREAK")
            .map(|(_, v)| v.as_str())
            .chain(["ask-slow-answer"])
            .collect();
        c.env("CIRCE_TEST_BREAK", breaks.join(","));
    }
    let mut child = c.spawn().expect("spawn circe");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write stdin");
    child
}

fn play(root: &Root, i: usize) -> Round {
    let (asked, before, after) = (
        format!("2025-11-21T{:02}:00:00Z", 1 + i % 20),
        format!("2025-11-21T{:02}:09:59Z", 1 + i % 20),
        format!("2025-11-21T{:02}:10:01Z", 1 + i % 20),
    );
    let deadline = format!("2025-11-21T{:02}:10:00Z", 1 + i % 20);
    let ask = format!("---\nto: e1\ntype: ask\nmsg-id: ask-{i}\ndeadline: {deadline}\n---\n?\n");
    let out = send_at(root, "coordinator", &asked, &ask).wait_with_output().unwrap();
    Out::from(&out).ok();
    let answer = format!(
        "---\nto: coordinator\ntype: ask-response\nin-reply-to: ask-{i}\nmsg-id: ans-{i}\n---\n!\n"
    );
    let slow = i.is_multiple_of(2);
    let answering = send_at_with(root, "e1", &before, &answer, slow);
    if slow {
        crate::common::nap(250);
    }
    let mut reap = root.command(None, &["reap"]);
    reap.env("CIRCE_NOW", &after);
    let reaping = reap.spawn().expect("spawn reap");
    let r = reaping.wait_with_output().unwrap();
    let a = answering.wait_with_output().unwrap();
    assert!(matches!(Out::from(&a).code, 0 | 3 | 4), "the answer: {:?}", Out::from(&a));
    assert!(matches!(Out::from(&r).code, 0 | 4), "reap: {:?}", Out::from(&r));
    let asks = root.run(None, &["asks", "--all", "--json"]).json();
    let state = asks["asks"]
        .as_array()
        .and_then(|v| v.iter().find(|a| a["msg_id"] == format!("ask-{i}").as_str()))
        .map(|a| a["state"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    // What reached the asker in reply to the ask: the answer, the expiry notice (from circe).
    let thread = root.run(None, &["thread", &format!("ask-{i}"), "--json"]).json();
    let replies = thread["replies"].as_array().cloned().unwrap_or_default();
    // The answer goes to the asker alone (`agent:coordinator`: a role has that name); the
    // notice as circe addresses it.
    let has = |from: &str, intent: &str, to: &str| {
        replies.iter().any(|r| r["from"] == from && r["intent"] == intent && r["to"] == to)
    };
    Round {
        state,
        answer_delivered: has("e1", "ask-response", "agent:coordinator"),
        notice_delivered: has("circe", "update", "coordinator"),
    }
}

/// Play `rounds` races; returns the rounds whose outcome is not exactly one winner.
fn race(url: &str, rounds: usize, brk: Option<&str>) -> Vec<(usize, Round)> {
    let mut root = Root::new(url, "client", 1);
    if let Some(b) = brk {
        root.env.push(("CIRCE_TEST_BREAK".into(), b.into()));
    }
    (0..rounds).map(|i| (i, play(&root, i))).filter(|(_, r)| !r.consistent()).collect()
}

#[test]
fn an_answer_racing_expiry_has_one_winner() {
    let c = need_pg!();
    let bad = race(&c.fresh_url(), 20, None);
    assert!(bad.is_empty(), "rounds with no single winner: {bad:?}");
}

/// The checker sees two winners when an answer under way holds nothing.
#[test]
#[should_panic(expected = "rounds with no single winner")]
fn the_ask_race_checker_sees_an_unheld_answer() {
    let Some(c) = crate::common::cluster() else {
        panic!("rounds with no single winner (skipped: no PostgreSQL)")
    };
    let bad = until_caught("pg ask checker", 3, Duration::from_secs(60), |_| {
        race(&c.fresh_url(), 6, Some("ask-unheld"))
    });
    assert!(bad.is_empty(), "rounds with no single winner: {bad:?}");
}

/// Two recipients answer one ask at once (each pausing between its mark and its delivery):
/// returns the rounds where the asker did not get exactly one answer, or the ask does not
/// name the one it got, or not exactly one answer command succeeded.
fn two_answers(url: &str, rounds: usize, brk: Option<&str>) -> Vec<String> {
    let mut root = Root::new(url, "client", 2);
    if let Some(b) = brk {
        root.env.push(("CIRCE_TEST_BREAK".into(), b.into()));
    }
    let mut bad = Vec::new();
    for i in 0..rounds {
        let ask = format!("---\nto: all\ntype: ask\nmsg-id: two-{i}\n---\n?\n");
        let now = "2025-11-21T10:00:00Z";
        Out::from(&send_at(&root, "coordinator", now, &ask).wait_with_output().unwrap()).ok();
        let answers: Vec<_> = ["e1", "e2"]
            .iter()
            .map(|a| {
                let text = format!(
                    "---\nto: coordinator\ntype: ask-response\nin-reply-to: two-{i}\nmsg-id: {a}-{i}\n---\n!\n"
                );
                send_at_with(&root, a, now, &text, true)
            })
            .collect();
        let codes: Vec<i32> =
            answers.into_iter().map(|c| Out::from(&c.wait_with_output().unwrap()).code).collect();
        let thread = root.run(None, &["thread", &format!("two-{i}"), "--json"]).json();
        let got: Vec<String> = thread["replies"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|r| r["intent"] == "ask-response" && r["to"] == "agent:coordinator")
            .map(|r| r["msg_id"].as_str().unwrap_or_default().to_string())
            .collect();
        let asks = root.run(None, &["asks", "--all", "--json"]).json();
        let rec = asks["asks"]
            .as_array()
            .and_then(|v| v.iter().find(|a| a["msg_id"] == format!("two-{i}").as_str()).cloned())
            .unwrap_or_default();
        let ok = codes.iter().filter(|c| **c == 0).count() == 1
            && got.len() == 1
            && rec["state"] == "answered"
            && rec["answer"] == got[0].as_str();
        if !ok {
            bad.push(format!("round {i}: exits {codes:?}, delivered {got:?}, record {rec}"));
        }
    }
    bad
}

#[test]
fn two_answers_racing_deliver_one() {
    let c = need_pg!();
    let bad = two_answers(&c.fresh_url(), 4, None);
    assert!(bad.is_empty(), "an ask answered twice or not at all: {bad:?}");
}

/// The checker sees two answers delivered when an ask's write does not compare its revision
/// (the answers still hold the ask, one after the other).
#[test]
#[should_panic(expected = "an ask answered twice or not at all")]
fn the_two_answers_checker_sees_an_unchecked_write() {
    let Some(c) = crate::common::cluster() else {
        panic!("an ask answered twice or not at all (skipped: no PostgreSQL)")
    };
    let bad = until_caught("pg two answers checker", 3, Duration::from_secs(60), |_| {
        two_answers(&c.fresh_url(), 2, Some("pg-ask-nocas"))
    });
    assert!(bad.is_empty(), "an ask answered twice or not at all: {bad:?}");
}
