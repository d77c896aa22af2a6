//! Reading messages: `inbox`, `show`, `validate`, `registry`.

use crate::common::Env;

fn data(name: &str) -> String {
    format!("{}/tests/cli/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn inbox_is_oldest_first() {
    let env = Env::new();
    // Sent out of order: the later one first, by an agent whose name sorts first.
    env.at(
        "2025-11-21T17:30:00Z",
        "engineer",
        &["send", "--to", "coordinator", "--intent", "status_update", "--summary", "later"],
    )
    .ok();
    env.at(
        "2025-11-21T17:10:00Z",
        "qa",
        &["send", "--to", "coordinator", "--intent", "status_update", "--summary", "earlier"],
    )
    .ok();
    env.at(
        "2025-11-21T17:20:00Z",
        "eagle",
        &["send", "--to", "coordinator", "--intent", "inform", "--summary", "middle"],
    )
    .ok();
    let out = env.as_("coordinator", &["inbox"]);
    out.ok();
    snap!(env, out);
    let j = env.as_("coordinator", &["inbox", "--json"]);
    j.ok();
    let j = j.json();
    let from: Vec<&str> =
        j["messages"].as_array().unwrap().iter().map(|m| m["from"].as_str().unwrap()).collect();
    assert_eq!(from, ["qa", "eagle", "engineer"]);
    assert_eq!(j["agent"], "coordinator");
    // Somebody else's inbox is empty.
    let e = env.as_("engineer", &["inbox"]);
    e.ok();
    assert_eq!(e.stdout, "engineer: inbox empty\n\nno waiting task that you may take\n");
}

/// `show TASK` gives every event of the task and no other, as `log --task` does, among
/// tasks whose ids share its beginning (its events are picked from the log by their id).
#[test]
fn show_gives_every_event_of_its_task_and_no_other() {
    let env = Env::new();
    for t in ["T1", "T10", "T1-A"] {
        env.open_task(t);
        env.as_("engineer", &["claim", t]).ok();
        env.as_("engineer", &["status", t, "in_progress"]).ok();
    }
    env.as_("engineer", &["release", "T1"]).ok();
    let shown = env.circe(["show", "T1", "--json"]).run();
    shown.ok();
    let logged = env.circe(["log", "--task", "T1", "--limit", "100", "--json"]).run();
    logged.ok();
    let ids = |v: Vec<serde_json::Value>| -> Vec<u64> {
        v.iter().map(|e| e["id"].as_u64().unwrap()).collect()
    };
    let shown = ids(shown.json()["events"].as_array().unwrap().clone());
    let logged = ids(logged.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect());
    assert_eq!(shown.len(), 4, "open, claim, in_progress, release: {shown:?}");
    assert_eq!(shown, logged);
}

#[test]
fn show_by_msg_id_and_by_task_id() {
    let env = Env::new();
    let sent = env.as_(
        "engineer",
        &["send", "--to", "qa", "--intent", "inform", "--summary", "look here", "--json"],
    );
    sent.ok();
    let id = sent.json()["msg_id"].as_str().unwrap().to_string();
    let out = env.circe(["show", &id]).run();
    out.ok();
    assert!(
        out.stdout.starts_with("inbox:qa 20251121_170000_engineer-qa_inform.md\n"),
        "{}",
        out.show()
    );
    assert!(out.stdout.contains("look here"), "{}", out.show());
    let j = env.circe(["show", &id, "--json"]).run();
    j.ok();
    assert_eq!(j.json()["box"], "inbox:qa");
    // A prefix of 8+ characters works too.
    env.circe(["show", &id[..12]]).run().ok();
    // Under a name its id does not say (renamed by hand): found by reading every message.
    if !crate::common::pg_mode() {
        let inbox = env.root().join("AGENTS/qa/INBOX");
        std::fs::rename(
            inbox.join("20251121_170000_engineer-qa_inform.md"),
            inbox.join("renamed.md"),
        )
        .unwrap();
        let out = env.circe(["show", &id]).run();
        assert!(out.ok().stdout.starts_with("inbox:qa renamed.md\n"), "{}", out.show());
        std::fs::rename(
            inbox.join("renamed.md"),
            inbox.join("20251121_170000_engineer-qa_inform.md"),
        )
        .unwrap();
    }

    env.open_task("AUTH-012");
    env.at("2025-11-21T17:05:00Z", "engineer", &["claim", "AUTH-012"]).ok();
    let t = env.circe(["show", "AUTH-012"]).now("2025-11-21T17:06:00Z").run();
    t.ok();
    snap!(env, t);
    let j = env.circe(["show", "AUTH-012", "--json"]).run();
    j.ok();
    let j = j.json();
    assert_eq!(j["task"]["status"], "claimed");
    assert_eq!(j["box"], "inbox:engineer");
    // Each message with its id, the key `show` and `thread` take.
    let id = j["messages"][0]["msg_id"].as_str().unwrap_or_default().to_string();
    assert!(id.len() > 8, "{j}");
    env.circe(["thread", &id]).run().ok();
    assert_eq!(j["events"].as_array().unwrap().len(), 2);
    let missing = env.circe(["show", "NOPE-1"]).run();
    missing.code(5);
}

/// `thread` takes every key `show` takes for a message (its msg id, 8+ characters of its
/// start or of its random end, its file name) and a task id (the thread of the task's first
/// message); a key that names nothing is told only of what names a thread.
#[test]
fn thread_takes_the_keys_show_takes() {
    let env = Env::new();
    let sent = env.as_(
        "coordinator",
        &[
            "send",
            "--to",
            "role:engineer",
            "--intent",
            "fix_bug",
            "--task",
            "BUG-1",
            "--summary",
            "login crash",
            "--json",
        ],
    );
    let root = sent.json()["msg_id"].as_str().unwrap().to_string();
    env.at("2025-11-21T17:01:00Z", "engineer", &["claim", "BUG-1"]).ok();
    let asked = env.at(
        "2025-11-21T17:02:00Z",
        "engineer",
        &[
            "send",
            "--to",
            "coordinator",
            "--intent",
            "question",
            "--in-reply-to",
            &root,
            "--summary",
            "which browser?",
            "--json",
        ],
    );
    let reply = asked.json()["msg_id"].as_str().unwrap().to_string();
    let reply_file = asked.json()["delivered"][0]["file"].as_str().unwrap().to_string();
    let random_end = root.rsplit('-').next().unwrap().to_string();
    assert_eq!(random_end.len(), 8, "{root}");
    for key in [root.as_str(), &root[..13], &random_end, "BUG-1", &reply, &reply_file] {
        let t = env.circe(["thread", key, "--json"]).run();
        t.ok();
        let j = t.json();
        assert_eq!(j["msg_id"], root.as_str(), "{key}: {}", t.show());
        assert_eq!(j["replies"][0]["msg_id"], reply.as_str(), "{key}: {}", t.show());
    }
    let none = env.circe(["thread", "NOPE-1"]).run();
    none.code(5);
    assert!(none.stderr.contains("`circe --agent NAME inbox`"), "{}", none.show());
    // `show TASK` lists a task's messages by file name (not by msg id), which names one too.
    assert!(none.stderr.contains("by file name"), "{}", none.show());
}

#[test]
fn the_spec_examples_are_valid() {
    let env = Env::new();
    let files: Vec<String> = (1..=3).map(|i| data(&format!("circe_example_{i}.md"))).collect();
    let out = env.circe([&["validate".to_string()], files.as_slice()].concat()).run();
    out.ok();
    assert_eq!(out.stdout.matches(": ok\n").count(), 3, "{}", out.show());
    let j =
        env.circe([&["validate".to_string(), "--json".into()], files.as_slice()].concat()).run();
    j.ok();
    assert_eq!(j.json()["invalid"], 0);
    // Outside any root, the built-in registry applies.
    let bare = Env::bare();
    bare.circe([&["validate".to_string()], files.as_slice()].concat()).run().ok();
}

#[test]
fn a_bad_file_lists_every_problem() {
    let env = Env::new();
    let bad = env.path().join("bad.md");
    std::fs::write(
        &bad,
        "# MESSAGE\nfrom: engineer\nto: qa\nintent: frobnicate\nstatus: sideways\ncreated_at: yesterday\nthis is not a header\n\nbody\n",
    )
    .unwrap();
    let good = data("circe_example_1.md");
    let out = env.circe(["validate", bad.to_str().unwrap(), &good]).run();
    out.code(3);
    snap!(env, out);
    assert!(out.stdout.is_empty(), "problems go to stderr: {}", out.show());
    assert!(out.stderr.contains("1 of 2 files invalid"), "{}", out.show());
    let lines = out.stderr.lines().filter(|l| l.contains("bad.md:")).count();
    assert!(lines >= 3, "every problem listed: {}", out.show());
    let j = env.circe(["validate", "--json", bad.to_str().unwrap(), &good]).run();
    j.code(3);
    let j = j.json();
    assert_eq!(j["invalid"], 1);
    assert_eq!(j["files"][1]["valid"], true);
    assert!(j["files"][0]["problems"].as_array().unwrap().len() >= 3);
    // A missing task_id for a task intent is a registry problem.
    std::fs::write(&bad, "# MESSAGE\nfrom: coordinator\nto: engineer\nintent: implement_feature\nstatus: new\ncreated_at: 2025-11-21T17:00:00Z\n\nbody\n").unwrap();
    let out = env.circe(["validate", bad.to_str().unwrap()]).run();
    out.code(3);
    assert!(out.stderr.contains("task_id"), "{}", out.show());
    // A draft may leave out from, status and created_at.
    std::fs::write(&bad, "# MESSAGE\nto: qa\nintent: inform\n\nbody\n").unwrap();
    env.circe(["validate", bad.to_str().unwrap()]).run().code(3);
    env.circe(["validate", "--draft", bad.to_str().unwrap()]).run().ok();
}

#[test]
fn registry_table_and_json() {
    let env = Env::new();
    let out = env.circe(["registry"]).run();
    out.ok();
    snap!(env, out);
    let j = env.circe(["registry", "--json"]).run();
    j.ok();
    let text = j.stdout.clone();
    for intent in ["implement_feature", "fix_bug", "test_results", "escalate", "task-complete"] {
        assert!(text.contains(intent), "{intent} missing from --json");
    }
    // circe.yaml additions show up.
    let cfg = env.read("circe.yaml").replace("  roles: []\n", "  roles: [designer]\n");
    env.set_config(&cfg);
    let j = env.circe(["registry", "--json"]).run();
    j.ok();
    assert!(j.json()["roles"].as_array().unwrap().iter().any(|r| r == "designer"), "{}", j.show());
    env.circe(["agent", "add", "dee", "--role", "designer"]).run().ok();
}

#[test]
fn inbox_json_gives_null_for_what_a_message_lacks() {
    local_only!("plants a message file in an INBOX by hand");
    let env = Env::new();
    env.as_("engineer", &["send", "--to", "qa", "--intent", "inform", "--summary", "no task"]).ok();
    std::fs::write(env.root().join("AGENTS/qa/INBOX/20251121_170001_x-qa_inform.md"), "junk\n")
        .unwrap();
    let j = env.as_("qa", &["inbox", "--json"]);
    j.ok();
    let j = j.json();
    let msgs = j["messages"].as_array().unwrap();
    let sent = msgs.iter().find(|m| m["valid"] == true).unwrap();
    assert_eq!(sent["task_id"], serde_json::Value::Null, "{sent}");
    assert_eq!(sent["from"], "engineer");
    assert!(sent["msg_id"].is_string(), "{sent}");
    let junk = msgs.iter().find(|m| m["valid"] == false).unwrap();
    for key in ["created_at", "from", "intent", "task_id", "msg_id"] {
        assert_eq!(junk[key], serde_json::Value::Null, "{key}: {junk}");
    }
    // People still see `-` in the table.
    let human = env.as_("qa", &["inbox"]);
    assert!(human.stdout.lines().any(|l| l.contains("engineer  inform  -")), "{}", human.show());
}

/// Two messages of one second from one sender to one receiver with one intent share a file
/// name: the second one taken lies beside the first in the WORKSPACE under a numbered name.
#[test]
fn take_keeps_two_messages_of_one_name_apart() {
    let env = Env::new();
    let (mut taken, mut got) = (Vec::new(), Vec::new());
    for text in ["one", "two"] {
        env.as_("qa", &["send", "--to", "agent:engineer", "--intent", "inform", "--summary", text])
            .ok();
        let name = env.ls("AGENTS/engineer/INBOX").remove(0);
        let o = env.as_("engineer", &["--json", "take", &name]);
        o.ok();
        got.push(o.json()["file"].as_str().unwrap_or_default().to_string());
        taken.push(name);
    }
    assert_eq!(taken[0], taken[1], "the same name twice");
    assert_eq!(got[1], taken[1].replace(".md", ".2.md"), "take says the name it got");
    let ws = env.ls("AGENTS/engineer/WORKSPACE");
    assert_eq!(ws.len(), 2, "{ws:?}");
    assert!(ws.iter().any(|n| n.ends_with(".2.md")), "{ws:?}");
    let o = env.as_("engineer", &["show", &ws[1]]);
    o.ok();
    env.circe(["doctor"]).run().ok();
}

/// `take` of a finished task is refused as a rule (exit 3) with the command that files it.
#[test]
fn take_of_a_finished_task_points_at_done() {
    let env = Env::new();
    env.complete_task("T1");
    let o = env.as_("engineer", &["take", "T1"]);
    o.code(3);
    assert!(o.stderr.contains("circe --agent engineer done T1"), "{}", o.show());
    env.as_("engineer", &["done", "T1"]).ok();
}
