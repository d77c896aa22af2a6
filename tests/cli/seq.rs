//! Sequence numbers through the CLI: every example of shared/reference 003 with the
//! reference's outcome (the five-line exchange, a gap, a missing number, a reset, a broadcast
//! with one counter, the state file), numbered chat lines, and the refusals.

use serde_json::Value;

use crate::common::{Env, assert_unchanged};

/// A root with the reference's team: lead, worker-a, worker-b, reviewer.
fn team() -> Env {
    let env = Env::new();
    for (a, r) in [
        ("lead", "coordinator"),
        ("worker-a", "engineer"),
        ("worker-b", "engineer"),
        ("reviewer", "qa"),
    ] {
        env.circe(["agent", "add", a, "--role", r]).run().ok();
    }
    env
}

/// `from` says `text` to `to` at second `s` of the test's minute (one message per second
/// keeps the INBOX in sending order).
fn say(env: &Env, s: u32, from: &str, to: &str, text: &str) -> String {
    let now = format!("2025-11-21T17:00:{s:02}Z");
    let o = env.at(
        &now,
        from,
        &["--json", "send", "--to", to, "--intent", "inform", "--summary", text],
    );
    o.ok();
    o.json()["delivered"][0]["file"].as_str().unwrap().to_string()
}

fn oneline(env: &Env, agent: &str) -> String {
    let o = env.as_(agent, &["inbox", "--oneline"]);
    o.ok();
    o.stdout.clone()
}

fn events(env: &Env, kind: &str) -> Vec<Value> {
    env.events().into_iter().filter(|e| e["event"] == kind).collect()
}

const STALE: &str =
    "\nstale (numbered at or below what you last saw of the sender: not new, kept):\n";

#[test]
fn the_five_line_exchange_reads_as_the_reference_writes_it() {
    let env = team();
    say(&env, 1, "lead", "all", "Hey team, starting comms check");
    say(&env, 2, "worker-a", "all", "Lead, I'm online");
    say(&env, 3, "reviewer", "all", "Confirmed, ready to review");
    say(&env, 4, "lead", "all", "Great, let's discuss the new feature");
    say(&env, 5, "worker-a", "all", "I have a question about that");
    let exchange = "(LEAD #1): Hey team, starting comms check
(WORKER-A #1): Lead, I'm online
(REVIEWER #1): Confirmed, ready to review
(LEAD #2): Great, let's discuss the new feature
(WORKER-A #2): I have a question about that
";
    assert_eq!(oneline(&env, "worker-b"), exchange);
    // The headers say the same: seq per sender, no epoch in epoch 0.
    let inbox = env.ls("AGENTS/worker-b/INBOX");
    let texts: Vec<String> =
        inbox.iter().map(|f| env.read(&format!("AGENTS/worker-b/INBOX/{f}"))).collect();
    assert!(texts.iter().any(|t| t.contains("from: lead\n") && t.contains("seq: 2\n")));
    assert!(texts.iter().all(|t| !t.contains("seq_epoch")));
    // The JSON gives each message's number, as its header and `--oneline` do.
    let json = env.as_("worker-b", &["--json", "inbox"]).json();
    let seqs: Vec<&Value> =
        json["messages"].as_array().unwrap().iter().map(|m| &m["seq"]).collect();
    assert_eq!(seqs.len(), 5, "{json}");
    assert!(seqs.iter().all(|s| s.is_u64()), "{json}");
    // worker-b processes all five; the same five arriving again (crossed in transit) are
    // stale: shown apart, kept, each logged as skipped once.
    local_only!("copies are put into the INBOX folder by hand");
    for f in &inbox {
        env.as_("worker-b", &["take", f]).ok();
    }
    for (i, f) in inbox.iter().enumerate() {
        let text = env.read(&format!("AGENTS/worker-b/WORKSPACE/{f}"));
        std::fs::write(env.root().join(format!("AGENTS/worker-b/INBOX/again-{i}.md")), text)
            .unwrap();
    }
    assert_eq!(oneline(&env, "worker-b"), format!("{}{exchange}", STALE.trim_start()));
    assert_eq!(env.ls("AGENTS/worker-b/INBOX").len(), 5, "stale messages are kept");
    assert_eq!(events(&env, "skip").len(), 5);
    oneline(&env, "worker-b");
    assert_eq!(events(&env, "skip").len(), 5, "logged once");
    let json = env.as_("worker-b", &["--json", "inbox"]).json();
    assert_eq!(json["messages"].as_array().unwrap().len(), 0);
    assert_eq!(json["stale"][0]["last_seen"], 2);
}

#[test]
fn a_gap_processes_7_and_skips_5() {
    let env = team();
    let mut files = Vec::new();
    for n in 1..=7 {
        let to = if n == 5 || n == 7 { "worker-b" } else { "reviewer" };
        files.push(say(&env, n, "lead", to, &format!("number {n}")));
    }
    assert_eq!(oneline(&env, "worker-b"), "(LEAD #5): number 5\n(LEAD #7): number 7\n");
    // #7 is processed although #6 never came (the gap is fine), and #5 is then stale.
    env.as_("worker-b", &["take", &files[6]]).ok();
    assert_eq!(oneline(&env, "worker-b"), format!("{}(LEAD #5): number 5\n", STALE.trim_start()));
    let skip = &events(&env, "skip")[0];
    assert_eq!((skip["agent"].as_str(), skip["sender"].as_str()), (Some("worker-b"), Some("lead")));
    assert_eq!((skip["seq"].as_u64(), skip["last_seen"].as_u64()), (Some(5), Some(7)));
    assert_eq!(skip["files"][0]["file"].as_str(), Some(files[4].as_str()));
    // #8 is new.
    say(&env, 8, "lead", "worker-b", "number 8");
    assert!(oneline(&env, "worker-b").starts_with("(LEAD #8): number 8\n"));
}

#[test]
fn a_missing_number_is_0_and_always_processed() {
    local_only!("messages from an old client are put into the INBOX folder by hand");
    let env = team();
    let f = say(&env, 1, "lead", "worker-b", "numbered");
    env.as_("worker-b", &["take", &f]).ok();
    let old = "# MESSAGE\nfrom: lead\nto: worker-b\nintent: inform\nstatus: new\ncreated_at: 2025-11-21T17:00:02Z\n\n## Summary\nfrom an old client\n";
    std::fs::write(env.root().join("AGENTS/worker-b/INBOX/old-client.md"), old).unwrap();
    let zero =
        old.replace("status: new\n", "status: new\nseq: 0\n").replace("an old client", "a zero");
    std::fs::write(env.root().join("AGENTS/worker-b/INBOX/zero.md"), zero).unwrap();
    assert_eq!(oneline(&env, "worker-b"), "(LEAD): from an old client\n(LEAD #0): from a zero\n");
    env.as_("worker-b", &["take", "old-client.md"]).ok();
    env.as_("worker-b", &["take", "zero.md"]).ok();
    assert!(events(&env, "skip").is_empty());
    let s = env.circe(["--json", "seq", "state"]).run();
    s.ok();
    assert_eq!(s.json()["lastSeen"]["WORKER-B"]["LEAD"], 1, "unnumbered messages move nothing");
}

/// A counter in its last epoch (a hand edit: no run resets that often) is not reset: exit 3,
/// nothing changed. The epoch wrapped to 0, which the counter's own check then refused as
/// going back (exit 1).
#[test]
fn a_counter_in_its_last_epoch_is_not_reset() {
    local_only!("plants a counter folder by hand");
    let env = team();
    std::fs::create_dir_all(env.root().join("seq/lead/18446744073709551615-00000000000000000005"))
        .unwrap();
    let before = env.state();
    let o = env.as_("lead", &["seq", "reset"]);
    o.code(3);
    assert!(o.stderr.contains("last epoch"), "{}", o.show());
    assert_eq!(env.state(), before, "nothing changed");
}

#[test]
fn a_reset_sender_starts_at_1_and_is_heard() {
    let env = team();
    let mut last = String::new();
    for n in 1..=3 {
        last = say(&env, n, "lead", "worker-b", &format!("before {n}"));
    }
    env.as_("worker-b", &["take", &last]).ok();
    let o = env.as_("lead", &["--json", "seq", "reset"]);
    o.ok();
    assert_eq!(o.json()["seq_epoch"], 1);
    let f = say(&env, 10, "lead", "worker-b", "after the restart");
    let text = env.read(&format!("AGENTS/worker-b/INBOX/{f}"));
    assert!(text.contains("seq: 1\nseq_epoch: 1\n"), "{text}");
    // The reference's implementation dropped this #1 (lastSeen was 3): circe takes it, and
    // the old epoch's #1 and #2 stay stale.
    assert_eq!(
        oneline(&env, "worker-b"),
        format!(
            "(LEAD #1 e1): after the restart\n{STALE}(LEAD #1): before 1\n(LEAD #2): before 2\n"
        )
    );
    assert_eq!(events(&env, "seq")[0]["seq_epoch"], 1);
    let human = env.circe(["seq", "state"]).run();
    assert!(human.stdout.contains("lead: #1 (epoch 1)"), "{}", human.stdout);
}

#[test]
fn a_broadcast_uses_the_one_counter() {
    let env = team();
    let to_a = say(&env, 1, "lead", "worker-a", "to A");
    let all = say(&env, 2, "lead", "all", "to everyone");
    say(&env, 3, "lead", "worker-b", "to B");
    assert_eq!(oneline(&env, "worker-a"), "(LEAD #1): to A\n(LEAD #2): to everyone\n");
    assert_eq!(oneline(&env, "worker-b"), "(LEAD #2): to everyone\n(LEAD #3): to B\n");
    assert!(oneline(&env, "reviewer").starts_with("(LEAD #2): to everyone\n"));
    // worker-a handles the broadcast first: #1 arriving late is stale.
    env.as_("worker-a", &["done", &all]).ok();
    assert_eq!(oneline(&env, "worker-a"), format!("{}(LEAD #1): to A\n", STALE.trim_start()));
    assert!(env.ls("AGENTS/worker-a/INBOX").contains(&to_a));
    let s = env.circe(["--json", "seq", "state"]).run();
    assert_eq!(s.json()["counters"]["LEAD"], 3);
}

const REFERENCE_STATE: &str = r#"{
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
fn the_reference_state_file_goes_in_and_comes_out() {
    let env = team();
    let empty = env.circe(["--json", "seq", "state"]).run();
    empty.ok();
    assert_eq!(empty.stdout, "{\n  \"counters\": {},\n  \"lastSeen\": {}\n}\n");
    std::fs::write(env.path().join("message-state.json"), REFERENCE_STATE).unwrap();
    let o = env.circe(["--json", "seq", "import", "message-state.json"]).run();
    o.ok();
    assert_eq!(
        (o.json()["counters_moved"].as_u64(), o.json()["last_seen_moved"].as_u64()),
        (Some(4), Some(12))
    );
    let out = env.circe(["--json", "seq", "state"]).run();
    out.ok();
    let got: Value = serde_json::from_str(&out.stdout).unwrap();
    let want: Value = serde_json::from_str(REFERENCE_STATE).unwrap();
    assert_eq!(got, want);
    // In the reference's layout (names sorted): each receiver's lastSeen on one line.
    assert!(
        out.stdout
            .contains("    \"LEAD\": { \"REVIEWER\": 4, \"WORKER-A\": 3, \"WORKER-B\": 2 },\n"),
        "{}",
        out.stdout
    );
    // Numbering goes on from the file.
    let f = say(&env, 1, "lead", "worker-b", "sixth");
    assert!(env.read(&format!("AGENTS/worker-b/INBOX/{f}")).contains("seq: 6\n"));
    // Round trip: circe's own output imports again and changes nothing.
    let out = env.circe(["--json", "seq", "state"]).run();
    std::fs::write(env.path().join("again.json"), &out.stdout).unwrap();
    let again = env.circe(["--json", "seq", "import", "again.json"]).run();
    again.ok();
    assert_eq!(again.json()["last_seen_moved"], 0);
}

#[test]
fn bad_state_files_and_numbered_drafts_are_refused_and_change_nothing() {
    let env = team();
    say(&env, 1, "lead", "worker-b", "one");
    say(&env, 2, "lead", "worker-b", "two");
    let before = env.state();
    let cases = [
        ("unknown.json", r#"{"counters": {"ORACLE": 1}, "lastSeen": {}}"#, 5, "ORACLE"),
        ("back.json", r#"{"counters": {"LEAD": 1}, "lastSeen": {}}"#, 3, "counter is at #2"),
        ("dup.json", r#"{"counters": {"LEAD": 3, "LEAD": 4}, "lastSeen": {}}"#, 3, "duplicate key"),
        ("extra.json", r#"{"counters": {}, "lastSeen": {}, "epochs": {}}"#, 3, "epochs"),
        ("text.json", "LEAD=5", 3, "not a message-state.json"),
    ];
    for (name, text, code, says) in cases {
        std::fs::write(env.path().join(name), text).unwrap();
        let o = env.circe(["seq", "import", name]).run();
        o.code(code);
        assert!(o.stderr.contains(says) && o.stderr.contains("hint:"), "{name}: {}", o.stderr);
    }
    env.circe(["seq", "import", "missing.json"]).run().code(5);
    let draft = "# MESSAGE\nto: worker-b\nintent: inform\nseq: 9\n\nhi\n";
    std::fs::write(env.path().join("draft.md"), draft).unwrap();
    let o = env.as_("lead", &["send", "--file", "draft.md"]);
    o.code(3);
    assert!(o.stderr.contains("own sequence number"), "{}", o.stderr);
    assert_unchanged(&before, &env.state());
    env.circe(["seq", "reset"]).run().code(2);
}

#[test]
fn chat_lines_carry_the_same_counter_and_watchers_skip_stale_ones() {
    let env = team();
    let chat = |text: &str| env.as_("lead", &["chat", "say", "--seq", "--to", "worker-b", text]);
    chat("first").ok();
    say(&env, 1, "lead", "worker-a", "a message between");
    chat("third").ok();
    env.as_("lead", &["chat", "say", "--to", "worker-b", "not numbered"]).ok();
    let text = env.read("chat.md");
    assert_eq!(
        text,
        "[lead-to-worker-b]: (LEAD #1): first\n[lead-to-worker-b]: (LEAD #3): third\n[lead-to-worker-b]: not numbered\n"
    );
    // A line that comes again (crossed in transit) is stale for worker-b's watcher.
    env.as_("lead", &["chat", "say", "--to", "worker-b", "(LEAD #1): first"]).ok();
    assert!(env.read("chat.md").ends_with("[lead-to-worker-b]: (LEAD #1): first\n"));
    let o = env.as_("worker-b", &["chat", "watch", "--once", "--from-start", "--cursor", "wb"]);
    o.ok();
    let got: Vec<Value> = o.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let msgs: Vec<&str> = got.iter().map(|v| v["message"].as_str().unwrap()).collect();
    assert_eq!(msgs, ["(LEAD #1): first", "(LEAD #3): third", "not numbered"]);
    assert!(o.stderr.contains("line 4 skipped: stale"), "{}", o.stderr);
    let skip = &events(&env, "skip")[0];
    assert_eq!((skip["seq"].as_u64(), skip["note"].as_str()), (Some(1), Some("chat line 4")));
    let s = env.circe(["--json", "seq", "state"]).run();
    assert_eq!(s.json()["lastSeen"]["WORKER-B"]["LEAD"], 3);
    // Without an agent the watcher prints every line, as the reference's server does.
    let all = env.circe(["chat", "watch", "--once", "--from-start"]).run();
    assert_eq!(all.stdout.lines().count(), 4);
    // With `chat: {seq: true}` every say is numbered, from the same counter.
    let cfg = env.circe(["config"]).run().stdout;
    env.set_config(&format!("{cfg}chat: {{seq: true}}\n"));
    env.as_("lead", &["chat", "say", "--to", "worker-b", "fourth"]).ok();
    assert!(env.read("chat.md").ends_with("[lead-to-worker-b]: (LEAD #4): fourth\n"));
}

/// lastSeen of worker-b's sender `lead`, as `seq state` prints it (0 when none).
fn seen_lead(env: &Env) -> u64 {
    let s = env.circe(["--json", "seq", "state"]).run();
    s.json()["lastSeen"]["WORKER-B"]["LEAD"].as_u64().unwrap_or(0)
}

#[test]
fn consumers_move_last_seen_only_once_the_message_was_handed_on() {
    let env = team();
    let one = say(&env, 1, "lead", "worker-b", "one");
    say(&env, 2, "lead", "worker-b", "two");
    // A hook that fails is not a hand-on: the event is set aside, lastSeen stays.
    let watch = |exec: &str, cursor: &str| {
        env.as_(
            "worker-b",
            &[
                "watch",
                "--once",
                "--from-start",
                "--cursor",
                cursor,
                "--exec",
                exec,
                "--max-attempts",
                "1",
            ],
        )
    };
    watch("exit 1", "failing").ok();
    assert_eq!(seen_lead(&env), 0);
    // Without --cursor a watcher is no consumer of the agent: nothing moves.
    env.as_("worker-b", &["watch", "--once", "--from-start"]).ok();
    assert_eq!(seen_lead(&env), 0);
    // A hook that succeeds hands both on: lastSeen is #2, and neither, still in the INBOX,
    // is stale (each was handed on: seen, not skipped); nothing was skipped.
    watch("true", "hook").ok();
    assert_eq!(seen_lead(&env), 2);
    assert_eq!(oneline(&env, "worker-b"), "(LEAD #1): one\n(LEAD #2): two\n");
    assert!(env.events().iter().all(|e| e["event"] != "skip"), "{:?}", env.events());
    // `wait` hands on what it printed: lead's #3, to worker-a.
    say(&env, 3, "lead", "worker-a", "three");
    env.as_("worker-a", &["wait", "--for", "inbox", "--timeout", "5s"]).ok();
    let s = env.circe(["--json", "seq", "state"]).run();
    assert_eq!(s.json()["lastSeen"]["WORKER-A"]["LEAD"], 3);
    assert_eq!(seen_lead(&env), 2);
    // Taken, #1 has left the INBOX: the next hand-on forgets it (the state keeps what lies
    // there only).
    env.as_("worker-b", &["take", &one]).ok();
    say(&env, 4, "lead", "worker-b", "four");
    watch("true", "hook").ok();
    let state = env.root().join("seen/worker-b.json");
    let seen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(seen["handed"]["LEAD"].as_array().map(Vec::len), Some(2), "{seen}");
}

/// A skip that cannot be logged says that nothing else changed, not that a change stands.
#[test]
fn a_chat_skip_that_cannot_be_logged_says_nothing_else_changed() {
    local_only!("plants a symlink at the event log");
    let env = team();
    env.as_("lead", &["chat", "say", "--seq", "--to", "worker-b", "first"]).ok();
    env.as_("lead", &["chat", "say", "--to", "worker-b", "(LEAD #1): first"]).ok();
    let watch = ["--json", "chat", "watch", "--once", "--from-start", "--cursor", "wb"];
    let log = env.root().join("LOGS/events.jsonl");
    let _ = std::fs::remove_file(&log);
    std::os::unix::fs::symlink(env.root().join("nowhere"), &log).unwrap();
    let o = env.as_("worker-b", &watch);
    assert_eq!(o.code, 1, "{}", o.show());
    let last = o.stdout.lines().last().unwrap();
    let err: Value = serde_json::from_str(last).unwrap();
    let hint = err["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("chat line 2 was passed over as stale: only its `skip`"), "{hint}");
    assert!(hint.contains("a symbolic link stands there"), "the reason is kept: {hint}");
    assert!(!hint.contains("was made and stands"), "{hint}");
    assert!(err["error"]["details"].get("committed").is_none(), "{last}");
}

/// A message counts for lastSeen however its address names the receiver: `agent:NAME`,
/// `role:NAME`, the bare name, `all`.
#[test]
fn every_way_of_addressing_the_receiver_moves_last_seen() {
    let env = team();
    let mut n = 0;
    for to in ["agent:worker-b", "role:engineer", "worker-b", "engineer", "all"] {
        n += 1;
        let f = say(&env, n, "lead", to, &format!("to {to}"));
        env.as_("worker-b", &["take", &f]).ok();
        assert_eq!(seen_lead(&env), u64::from(n), "after a message to {to}");
    }
}

/// A stale message is never handed on as new: an agent's stream passes over the event that
/// brought it, and `wait --for inbox` does not count it.
#[test]
fn streams_pass_over_stale_messages() {
    let env = team();
    // A task opened first: its ticket is lead's #1.
    let open = ["send", "--to", "worker-b", "--intent", "implement_feature", "--task", "T1"];
    env.at("2025-11-21T17:00:01Z", "lead", &[&open[..], &["--summary", "t"]].concat()).ok();
    let five = say(&env, 5, "lead", "worker-b", "number 5");
    let seven = say(&env, 7, "lead", "worker-b", "number 7");
    env.as_("worker-b", &["take", &seven]).ok();
    let o = env.as_("worker-b", &["watch", "--from-start", "--once", "--json", "--kind", "send"]);
    o.ok();
    let files: Vec<String> = o
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["files"][0]["file"].as_str().map(str::to_string))
        .collect();
    assert_eq!(files, [seven], "#5 is stale once #7 was handled: {}", o.show());
    let w = env.as_("worker-b", &["wait", "--for", "inbox", "--timeout", "1s"]);
    w.code(7);
    // The ticket claimed into the INBOX is no delivery: its number (#1, below what worker-b
    // saw of lead) does not keep the claim from the agent's stream.
    env.as_("worker-b", &["claim", "T1"]).ok();
    let o = env.as_("worker-b", &["watch", "--from-start", "--once", "--json", "--kind", "claim"]);
    assert_eq!(o.stdout.lines().count(), 1, "{}", o.show());
    say(&env, 8, "lead", "worker-b", "number 8");
    let w = env.as_("worker-b", &["wait", "--for", "inbox", "--timeout", "1s"]);
    w.ok();
    assert!(!w.stdout.contains(&five), "{}", w.show());
}

/// Starting one's task does not hide what its sender said before: a task's message reaches
/// the agent by a claim, no delivery, so taking it moves no lastSeen. Taking a later plain
/// message does (the reference's rule), and says how many unread messages became stale.
#[test]
fn taking_a_task_hides_no_earlier_message_and_taking_a_later_one_says_so() {
    let env = Env::new();
    let update =
        ["send", "--to", "agent:engineer", "--intent", "update", "--summary", "spec changed"];
    env.as_("coordinator", &update).ok();
    env.open_task("T-1");
    env.as_("engineer", &["claim", "T-1"]).ok();
    let took = env.as_("engineer", &["take", "T-1"]);
    took.ok();
    assert!(!took.stderr.contains("stale"), "{}", took.show());
    let w = env.as_("engineer", &["wait", "--for", "inbox", "--timeout", "1s", "--json"]);
    w.ok();
    assert!(w.stdout.contains("update"), "{}", w.show());
    // A task held and not taken yet: its ticket lies in the INBOX, fenced by its epoch.
    env.open_task("T-2");
    env.as_("engineer", &["claim", "T-2"]).ok();
    for (id, s) in [("m-1", "one"), ("m-2", "two")] {
        let inform = ["send", "--to", "engineer", "--intent", "inform", "--summary", s];
        env.as_("coordinator", &[&inform[..], &["--msg-id", id]].concat()).ok();
    }
    let took = env.as_("engineer", &["take", "m-2"]);
    took.ok();
    assert!(
        // m-1 (the update the wait handed on above is seen, not stale).
        took.stderr.contains("warning: 1 unread message in your INBOX is stale now"),
        "{}",
        took.show()
    );
    let inbox = env.as_("engineer", &["inbox", "--json"]);
    let stale = inbox.json()["stale"].to_string();
    assert!(!stale.contains("T-2") && stale.contains("m-1"), "{}", inbox.show());
}

/// A `wait` that hands on a sender's later message says, as `take` does, how many of that
/// sender's unread messages became stale.
#[test]
fn a_wait_that_makes_unread_messages_stale_says_so() {
    let env = Env::new();
    let ask = ["send", "--to", "coordinator", "--intent", "question", "--summary", "which db?"];
    env.as_("engineer", &[&ask[..], &["--msg-id", "q-1"]].concat()).ok();
    let inform = ["send", "--to", "engineer", "--intent", "inform", "--summary", "unread"];
    env.as_("coordinator", &inform).ok();
    let answer = ["send", "--to", "engineer", "--intent", "answer", "--in-reply-to", "q-1"];
    env.as_("coordinator", &[&answer[..], &["--summary", "postgres"]].concat()).ok();
    let w = env.as_("engineer", &["wait", "--for", "reply:q-1", "--timeout", "1s"]);
    w.ok();
    assert!(
        w.stderr.contains("warning: 1 unread message in your INBOX is stale now"),
        "{}",
        w.show()
    );
    let inbox = env.as_("engineer", &["inbox", "--json"]);
    assert!(inbox.json()["stale"].to_string().contains("unread"), "{}", inbox.show());
}

/// The coordinator informs qa (`summary`), a numbered send.
fn inform_qa(env: &Env, summary: &str) -> crate::common::Out {
    env.as_(
        "coordinator",
        &["send", "--to", "agent:qa", "--intent", "inform", "--summary", summary],
    )
}

/// The coordinator's first send ("one"), and the counter entry it leaves.
fn first_counter_entry(env: &Env) -> std::path::PathBuf {
    inform_qa(env, "one").ok();
    let seq = env.dot_circe().join("seq/coordinator");
    std::fs::read_dir(&seq).unwrap().next().unwrap().unwrap().path()
}

/// A file manager's `.DS_Store` in a sender's counter entry is no copy: the sender's next
/// sends go on, `seq state` reads, and doctor finds nothing.
#[test]
fn a_hidden_file_in_a_counter_entry_blocks_no_send() {
    local_only!("a database root keeps no counter folders");
    let env = Env::local();
    let send = |s: &str| inform_qa(&env, s);
    let entry = first_counter_entry(&env);
    std::fs::write(entry.join(".DS_Store"), "finder").unwrap();
    send("two").ok();
    send("three").ok();
    env.circe(["seq", "state"]).run().ok();
    env.circe(["doctor"]).run().ok();
    assert_eq!(env.ls("AGENTS/qa/INBOX").len(), 3);
}

/// A file a person put in a counter entry stops the sender's numbered sends (it is no copy
/// circe staged, and may be someone's): the send and doctor say to move it out, `--repair`
/// does not claim to have settled what it could not, and once it is out the sends go on.
#[test]
fn a_stray_file_in_a_counter_entry_is_said_once_with_its_way_out() {
    local_only!("a database root keeps no counter folders");
    let env = Env::local();
    let send = |s: &str| inform_qa(&env, s);
    let entry = first_counter_entry(&env);
    std::fs::write(entry.join("notes"), "mine").unwrap();
    let refused = send("two");
    refused.code(1);
    assert!(refused.stderr.contains("move it out of that folder"), "{}", refused.show());
    // Plain doctor says so too, and does not send the reader to `--repair`.
    let plain = env.circe(["doctor"]).run();
    plain.code(1);
    assert!(plain.stderr.contains("`--repair` cannot settle it"), "{}", plain.show());
    assert!(plain.stderr.contains("none of these is for `--repair`"), "{}", plain.show());
    let doctor = env.circe(["doctor", "--repair"]).run();
    doctor.code(1);
    assert!(!doctor.stderr.contains("[repaired]"), "{}", doctor.show());
    assert_eq!(doctor.stderr.matches("[VIOLATED]").count(), 1, "{}", doctor.show());
    assert!(doctor.stderr.contains("move it out of that folder"), "{}", doctor.show());
    std::fs::rename(entry.join("notes"), env.path().join("notes")).unwrap();
    env.circe(["doctor", "--repair"]).run().ok();
    send("three").ok();
    assert_eq!(env.ls("AGENTS/qa/INBOX").len(), 2);
}

/// The coordinator's numbered chat line to qa, cut off once written (its entry waits to
/// be settled). Returns its entry's name under `seq/coordinator`.
fn cut_chat_line(env: &Env) -> String {
    let say = ["chat", "say", "--seq", "--to", "qa", "hello"];
    env.circe(say).agent("coordinator").var("CIRCE_CRASH_AT", "seq.chat.written").run().code(86);
    std::fs::read_dir(env.dot_circe().join("seq/coordinator"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .max()
        .unwrap()
}

/// How many `repair` events say the cut-off chat line (`cut_chat_line`) was settled.
fn chat_line_settled(env: &Env) -> usize {
    env.events()
        .into_iter()
        .filter(|e| e["event"] == "repair")
        .filter(|e| e["what"].as_str().is_some_and(|w| w.contains("chat line coordinator #1")))
        .count()
}

/// A settle stopped part way (the newest entry holds a file a person put there) still logs
/// the repairs it made before stopping: the older entry's chat line is said settled in the
/// log, once, and not settled again once the way is clear.
#[test]
fn a_settle_stopped_part_way_logs_what_it_settled() {
    local_only!("a database root keeps no counter folders");
    let env = Env::local();
    let last = cut_chat_line(&env);
    let seq = env.dot_circe().join("seq/coordinator");
    let (epoch, n) = last.split_once('-').unwrap();
    let next = format!("{epoch}-{:020}", n.parse::<u64>().unwrap() + 1);
    std::fs::create_dir(seq.join(&next)).unwrap();
    std::fs::write(seq.join(&next).join("notes"), "mine").unwrap();
    let settled = chat_line_settled;
    // Plain doctor: the older entry is --repair's to settle, the one with the stray is not.
    let plain = env.circe(["doctor"]).run();
    plain.code(1);
    let hint = "mend 1 of them (invariant 1); the other line says what to do";
    assert!(plain.stderr.contains(hint), "{}", plain.show());
    let doctor = env.circe(["doctor", "--repair"]).run();
    doctor.code(1);
    assert!(doctor.stderr.contains("move it out of that folder"), "{}", doctor.show());
    assert_eq!(settled(&env), 1, "{:?}", env.events());
    std::fs::remove_file(seq.join(&next).join("notes")).unwrap();
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(settled(&env), 1, "{:?}", env.events());
}

/// A command that settles every sender (`seq state`) and is stopped by one sender's entry
/// (a file a person put there) still logs what it settled for the senders before it: the
/// coordinator's cut-off chat line is said settled in the log, once.
#[test]
fn a_settle_of_every_sender_stopped_by_one_logs_the_others() {
    local_only!("a database root keeps no counter folders");
    let env = Env::local();
    let entry = cut_chat_line(&env);
    // `engineer` sorts after `coordinator`: its settle comes second, and stops.
    let stray = env.dot_circe().join("seq/engineer").join(&entry);
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("notes"), "mine").unwrap();
    let settled = chat_line_settled;
    let o = env.circe(["seq", "state"]).run();
    assert_ne!(o.code, 0, "{}", o.show());
    assert_eq!(settled(&env), 1, "{:?}", env.events());
    std::fs::remove_file(stray.join("notes")).unwrap();
    env.circe(["seq", "state"]).run().ok();
    assert_eq!(settled(&env), 1, "{:?}", env.events());
}

/// A numbered send cut off after its first copy, finished by a settle that a box behind a
/// link stops part way: the copies that settle delivered are in the log at once (a
/// `repair` naming them), and the last one when the box is back; every copy is in some
/// event, none in two.
#[test]
fn a_send_finished_part_way_logs_the_copies_it_delivered() {
    local_only!("moves a box away by hand");
    let env = Env::new();
    let cut = ["send", "--to", "all", "--intent", "inform", "--summary", "hi"];
    env.circe(cut).agent("coordinator").var("CIRCE_CRASH_AT", "seq.committed").run().code(86);
    let seq = env.root().join("seq/coordinator");
    let entry = std::fs::read_dir(&seq).unwrap().map(|e| e.unwrap().path()).max().unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&entry)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert!(left.len() >= 2, "two copies or more wait: {left:?}");
    // The last copy's box goes behind a link: the settle delivers the others, then stops.
    let last = left.last().unwrap().split('~').nth(1).unwrap().replace('+', "/");
    let away = env.link_away(&last);
    let doc = env.circe(["doctor", "--repair"]).run();
    assert_eq!(doc.code, 1, "{}", doc.show());
    let repairs = |env: &Env| -> Vec<Value> {
        env.events().into_iter().filter(|e| e["event"] == "repair").collect()
    };
    let partly: Vec<Value> = repairs(&env)
        .into_iter()
        .filter(|e| e["what"].as_str().is_some_and(|w| w.contains("partly finished")))
        .collect();
    assert_eq!(partly.len(), 1, "{:?}", env.events());
    assert_eq!(partly[0]["files"].as_array().map(Vec::len), Some(left.len() - 1), "{partly:?}");
    // `--repair` may have moved the link away already (and made the box again).
    let link = std::fs::symlink_metadata(env.root().join(&last)).unwrap();
    if link.file_type().is_symlink() {
        env.put_back(&last, &away);
    }
    env.circe(["doctor", "--repair"]).run().ok();
    let files: Vec<Value> = repairs(&env)
        .iter()
        .flat_map(|e| e["files"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(files.len(), left.len(), "each waiting copy logged once: {:?}", env.events());
}

/// A settle whose repairs stand but cannot be logged (the event log behind a link): the
/// send that settled on its way says nothing of it was done (`committed: false`), not
/// that a change stands.
#[test]
fn a_settle_that_cannot_be_logged_says_the_command_did_nothing() {
    local_only!("plants a symlink at the event log");
    let env = Env::new();
    let cut = ["send", "--to", "all", "--intent", "inform", "--summary", "hi"];
    env.circe(cut).agent("coordinator").var("CIRCE_CRASH_AT", "seq.committed").run().code(86);
    let log = env.root().join("LOGS/events.jsonl");
    let _ = std::fs::remove_file(&log);
    std::os::unix::fs::symlink(env.root().join("nowhere"), &log).unwrap();
    let again = ["--json", "send", "--to", "qa", "--intent", "inform", "--summary", "again"];
    let o = env.circe(again).agent("coordinator").run();
    assert_eq!(o.code, 1, "{}", o.show());
    let err: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(err["error"]["details"]["committed"], false, "{}", o.stdout);
    let hint = err["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("nothing of this command was done"), "{hint}");
    assert!(!hint.contains("was made and stands"), "{hint}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("settled, but not logged"),
        "{}",
        o.stdout
    );
}

/// `prime` counts the INBOX as `inbox` sorts it: a message made stale by a later one handed
/// on is no new message (it wakes no `wait --for inbox`), and is counted as stale, in the
/// text and in the JSON alike.
#[test]
fn prime_counts_a_stale_message_as_stale_not_new() {
    let env = Env::new();
    let send = |summary: &str| {
        let args = ["send", "--to", "coordinator", "--intent", "status_update", "--summary"];
        let o = env.as_("engineer", &[&args[..], &[summary, "--json"]].concat());
        o.ok();
        o.json()["msg_id"].as_str().unwrap().to_string()
    };
    send("first");
    let second = send("second");
    env.as_("coordinator", &["done", &second]).ok();
    let inbox = env.as_("coordinator", &["inbox", "--json"]).json();
    assert_eq!(inbox["messages"].as_array().unwrap().len(), 0, "{inbox}");
    assert_eq!(inbox["stale"].as_array().unwrap().len(), 1, "{inbox}");
    let prime = env.as_("coordinator", &["prime", "--json"]).json();
    assert_eq!(prime["inbox_count"], 0, "{prime}");
    assert_eq!(prime["stale_count"], 1, "{prime}");
    let prime = env.as_("coordinator", &["prime"]);
    assert!(
        prime.stdout.contains("inbox: 0 messages, 1 stale (circe --agent coordinator inbox)"),
        "{}",
        prime.show()
    );
    env.circe(["wait", "--for", "inbox", "--timeout", "300ms"]).agent("coordinator").run().code(7);
}
