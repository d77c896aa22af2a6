//! Request ids and message ids (the same meaning for every engine): a claim retried with
//! its request id returns the grant it made; a message id is never delivered twice.

use crate::common::{Env, Out};

#[test]
fn a_claim_retried_with_its_request_id_returns_the_same_task() {
    let env = Env::new();
    env.open_task("T-1");
    env.open_task("T-2");
    let a = env.as_("engineer", &["claim", "--next", "--request-id", "r-1", "--json"]);
    a.ok();
    let b = env.as_("engineer", &["claim", "--next", "--request-id", "r-1", "--json"]);
    b.ok();
    assert_eq!(a.json()["task_id"], b.json()["task_id"]);
    assert_eq!(b.json()["already_held"], true);
    assert_eq!(env.record("T-2").status.as_str(), "new", "no second task was taken");
    // A request id names one claim: another task with it is a usage error.
    env.as_("engineer", &["claim", "T-2", "--request-id", "r-1"]).code(2);
    // Without a request id, claim --next means the next task.
    let c = env.as_("engineer", &["claim", "--next", "--json"]);
    c.ok();
    assert_eq!(c.json()["task_id"], "T-2");
    // Once the task changed hands, the old request id no longer returns it.
    env.as_("engineer", &["release", "T-1"]).ok();
    env.as_("engineer-2", &["claim", "T-1"]).code(5);
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.as_("engineer-2", &["claim", "T-1"]).ok();
    let gone = env.as_("engineer", &["claim", "--next", "--request-id", "r-1"]);
    assert_eq!(gone.code, 4, "{}", gone.show());
    assert!(gone.stderr.contains("now (claimed, owner engineer-2)"), "{}", gone.show());
    // A grant its holder moved on (here: to in_progress) is told as such, not as lost.
    env.open_task("T-3");
    env.as_("engineer", &["claim", "T-3", "--request-id", "r-3"]).ok();
    env.as_("engineer", &["status", "T-3", "in_progress"]).ok();
    env.as_("engineer", &["status", "T-3", "failed"]).ok();
    let moved = env.as_("engineer", &["claim", "T-3", "--request-id", "r-3"]);
    assert_eq!(moved.code, 4, "{}", moved.show());
    assert!(moved.stderr.contains("at epoch 1, but it is failed now"), "{}", moved.show());
    assert!(moved.stderr.contains("its holder moved it"), "{}", moved.show());
}

#[test]
fn a_message_id_is_delivered_once() {
    let env = Env::new();
    let send = ["send", "--to", "qa", "--intent", "inform", "--summary", "hi", "--msg-id"];
    let id = "20251121T170000000Z-aaaaaaaa";
    let a = env.as_("engineer", &[&send[..], &[id, "--json"]].concat());
    a.ok();
    let b = env.as_("engineer", &[&send[..], &[id, "--json"]].concat());
    b.ok();
    assert_eq!(b.json()["already_delivered"], true);
    assert_eq!(env.ls("AGENTS/qa/INBOX").len(), 1, "delivered once");
    let tid = "20251121T170000000Z-bbbbbbbb";
    for _ in 0..2 {
        env.as_(
            "coordinator",
            &[
                "send",
                "--to",
                "all",
                "--intent",
                "implement_feature",
                "--task",
                "T-9",
                "--summary",
                "x",
                "--msg-id",
                tid,
            ],
        )
        .ok();
    }
    assert_eq!(env.ls("NEW_MESSAGES").len(), 1, "a task message too");
}

/// `rounds` rounds of three sends of one message id started at once, to qa, by `senders`
/// (one sender: a retry racing the first try; several: senders who chose one id), with
/// `vars`: what went wrong (a send that failed, an id delivered more than once). A send by
/// another sender than the one that delivered the id is refused (exit 4, the id taken).
fn racing_sends_of_one_id(
    env: &Env,
    rounds: usize,
    senders: [&str; 3],
    vars: &[(&str, &str)],
) -> Vec<String> {
    let mut problems = Vec::new();
    for r in 0..rounds {
        let id = format!("20251121T170000000Z-r{r:07}");
        let outs: Vec<Out> = std::thread::scope(|s| {
            let runs: Vec<_> = senders
                .iter()
                .map(|who| {
                    let id = &id;
                    s.spawn(move || {
                        let args = ["send", "--to", "qa", "--intent", "inform", "--summary", "hi"];
                        let mut run = env.circe([&args[..], &["--msg-id", id, "--json"]].concat());
                        run = run.agent(who);
                        for (k, v) in vars {
                            run = run.var(k, v);
                        }
                        run.run()
                    })
                })
                .collect();
            runs.into_iter().map(|h| h.join().expect("a sender thread")).collect()
        });
        for o in &outs {
            let taken = o.code == 4 && o.stderr.contains("is taken") && senders[0] != senders[1];
            if o.code != 0 && !taken {
                problems.push(format!("round {r}: a send failed: {}", o.show()));
            }
        }
        let fresh = outs.iter().filter(|o| o.code == 0 && o.json()["already_delivered"] == false);
        if fresh.count() > 1 {
            problems.push(format!("round {r}: {id} delivered by more than one send"));
        }
    }
    let copies = env.ls("AGENTS/qa/INBOX").len();
    if copies != rounds {
        problems.push(format!("{copies} copies in qa's INBOX for {rounds} message ids"));
    }
    problems
}

/// Sends of one message id started at the same moment deliver it once: the look for an
/// earlier copy is made under the sender's hold on its sequence counter, so the later
/// sends find the first's delivery and answer with it.
#[test]
fn sends_of_one_message_id_at_the_same_moment_deliver_it_once() {
    let env = Env::new();
    let p = racing_sends_of_one_id(&env, 12, ["engineer"; 3], &[]);
    assert!(p.is_empty(), "{p:#?}");
}

/// Senders who chose one message id at the same moment: it is delivered once, and the
/// others are told it is taken (each send holds the id while it looks and delivers).
#[test]
fn one_message_id_from_several_senders_at_once_is_delivered_once() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let p = racing_sends_of_one_id(&env, 12, ["engineer", "engineer-2", "coordinator"], &[]);
    assert!(p.is_empty(), "{p:#?}");
}

/// The doubled deliveries the checker above sees on the variant `msgid-unheld`, by
/// `senders`: 40 rounds on a fresh root, played again (longer) until caught, as every race
/// checker's broken variant is (a loaded machine can pass through the window).
fn doubles_when_unheld(what: &str, senders: [&str; 3]) -> Vec<String> {
    crate::caught::until_caught(what, 4, std::time::Duration::from_secs(90), |i| {
        let env = Env::new();
        env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
        let broken = [("CIRCE_TEST_BREAK", "msgid-unheld")];
        let mut p = racing_sends_of_one_id(&env, 40 * (i + 1), senders, &broken);
        p.retain(|x| x.contains("delivered by more than one"));
        p
    })
}

/// The checker above, on a variant that sends without holding the id.
#[test]
fn the_message_id_checker_sees_two_senders_deliver_one_id_when_unheld() {
    let p = doubles_when_unheld("msgid-unheld, senders", ["engineer", "engineer-2", "coordinator"]);
    assert!(!p.is_empty(), "no id delivered twice with the id unheld");
}

/// The checker above, on a variant that looks before taking the hold.
#[test]
fn the_message_id_checker_sees_two_deliveries_when_the_look_is_unheld() {
    let p = doubles_when_unheld("msgid-unheld, retries", ["engineer"; 3]);
    assert!(!p.is_empty(), "no id delivered twice with the look unheld");
}

/// A request id is 1 to 128 printable characters on every engine; another is a usage error
/// that takes nothing.
#[test]
fn a_request_id_that_is_no_word_is_refused_and_takes_nothing() {
    let env = Env::new();
    env.open_task("T-1");
    let long = "x".repeat(129);
    for (bad, wrong) in [
        ("a b/c", "holds a space"),
        ("", "is empty"),
        (long.as_str(), "is 129 bytes long"),
        ("r\u{e9}", "holds `\u{e9}`, which is not ASCII"),
    ] {
        let o = env.as_("engineer", &["claim", "T-1", "--request-id", bad]);
        o.code(2);
        assert!(o.stderr.contains(wrong), "{}", o.show());
        assert!(o.stderr.contains("one word of 1-128 printable ASCII"), "{}", o.show());
        assert_eq!(env.record("T-1").status.as_str(), "new", "{bad:?} took the task");
    }
}
