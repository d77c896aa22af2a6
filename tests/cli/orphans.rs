//! Retired agents' orphans (PROTOCOLS.md section 16): what `agent retire` counts, what a
//! redelivery hands on and to whom, and what the recipient is told.

use crate::common::Env;

/// `circe --agent coordinator send ... --json`: the message's id.
fn sent_id(env: &Env, args: &[&str]) -> String {
    let o = env.circe([&["--json", "send"][..], args].concat()).agent("coordinator").run();
    o.ok().json()["msg_id"].as_str().expect("msg_id").to_string()
}

/// A redelivery to an agent that holds a copy of the message already (a broadcast reached
/// both) delivers nothing: the orphan copy is filed into LOGS as the duplicate it is, the
/// recipient keeps its one copy, and its id names one message there.
#[test]
fn redelivering_a_message_its_recipient_holds_files_the_orphan_copy() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let id = sent_id(
        &env,
        &["--to", "role:engineer", "--intent", "inform", "--summary", "hello engineers"],
    );
    env.as_("coordinator", &["agent", "retire", "engineer"]).ok();
    let o = env
        .circe(["--json", "orphans", "redeliver", &id, "--to", "engineer-2"])
        .agent("coordinator")
        .run();
    let j = o.ok().json();
    assert_eq!((&j["already"], &j["box"]), (&true.into(), &"logs".into()), "{}", o.show());
    assert!(
        j["held_copy"].as_str().is_some_and(|h| h.starts_with("inbox:engineer-2/")),
        "{}",
        o.show()
    );
    assert_eq!(env.ls("AGENTS/engineer-2/INBOX").len(), 1, "no second copy");
    let left = env.circe(["orphans", "--json"]).run().json();
    assert_eq!(left["messages"].as_array().unwrap().len(), 0, "{left}");
    let text = env.as_("coordinator", &["orphans"]);
    assert!(text.ok().stdout.contains("no orphans"), "{}", text.show());
    env.as_("engineer-2", &["done", &id]).ok();
    env.circe(["doctor"]).run().ok();
}

/// A whole message id naming two copies in one's boxes: the hint says to give a file name,
/// not the message id that was given.
#[test]
fn a_whole_msg_id_naming_two_copies_asks_for_a_file_name() {
    local_only!("plants a second copy in an INBOX");
    let env = Env::new();
    let id = sent_id(&env, &["--to", "agent:engineer", "--intent", "inform", "--summary", "hi"]);
    let inbox = env.root().join("AGENTS/engineer/INBOX");
    let file = env.ls("AGENTS/engineer/INBOX").pop().unwrap();
    std::fs::copy(inbox.join(&file), inbox.join(file.replace(".md", ".2.md"))).unwrap();
    let o = env.circe(["--json", "done", &id]).agent("engineer").run();
    o.code(2);
    let hint = o.json()["error"]["hint"].as_str().unwrap().to_string();
    assert!(hint.contains("give one by its file name"), "{}", o.show());
    assert!(!hint.contains("or message id"), "{}", o.show());
}

/// A redelivered orphan reaches its new recipient for the first time: however far that
/// recipient's lastSeen of the sender went meanwhile, the copy is new to it, for `inbox`,
/// `wait --for inbox` and its stream alike.
#[test]
fn a_redelivered_orphan_is_new_to_its_recipient_whatever_its_number() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let rotated = ["--intent", "inform", "--summary", "staging password rotated"];
    let m1 = sent_id(&env, &[&["--to", "agent:engineer"][..], &rotated].concat());
    let m2 = sent_id(&env, &["--to", "agent:engineer-2", "--intent", "inform", "--summary", "hi"]);
    env.as_("engineer-2", &["done", &m2]).ok();
    env.as_("coordinator", &["agent", "retire", "engineer"]).ok();
    env.as_("coordinator", &["orphans", "redeliver", &m1, "--to", "engineer-2"]).ok();
    let w = env.as_("engineer-2", &["wait", "--for", "inbox", "--timeout", "1s"]);
    assert_eq!(w.code, 0, "the redelivered copy is new: {}", w.show());
    let inbox = env.as_("engineer-2", &["inbox", "--json"]);
    let j = inbox.ok().json();
    let ids: Vec<&str> =
        j["messages"].as_array().unwrap().iter().filter_map(|m| m["msg_id"].as_str()).collect();
    assert_eq!(ids, [m1.as_str()], "{}", inbox.show());
    assert_eq!(j["stale"].as_array().map_or(0, Vec::len), 0, "{}", inbox.show());
    let o = env
        .as_("engineer-2", &["watch", "--from-start", "--once", "--json", "--kind", "redeliver"]);
    assert_eq!(o.ok().stdout.lines().count(), 1, "its stream hands it on: {}", o.show());
    assert!(!env.events().iter().any(|e| e["event"] == "skip"), "nothing was skipped as stale");
    // Taken and filed, it moves no lastSeen back, and the next message is new as ever.
    env.as_("engineer-2", &["take", &m1]).ok();
    env.as_("engineer-2", &["done", &m1]).ok();
    sent_id(&env, &["--to", "agent:engineer-2", "--intent", "inform", "--summary", "next"]);
    env.as_("engineer-2", &["wait", "--for", "inbox", "--timeout", "1s"]).ok();
}

/// A waiting task addressed to a retired agent is an orphan: `agent retire` counts it (in
/// words that agree with the number), a task sent to that agent later is said to wait for no
/// one, and a coordinator's `prime` says how many orphans wait and where they are listed.
#[test]
fn tasks_addressed_to_a_retired_agent_are_counted_and_said() {
    let env = Env::new();
    env.circe(["agent", "add", "qa-2", "--role", "qa"]).run().ok();
    let task = |t: &str| {
        env.as_(
            "coordinator",
            &["send", "--to", "agent:qa-2", "--intent", "task", "--task", t, "--summary", "x"],
        )
    };
    task("T-1").ok();
    let r = env.as_("coordinator", &["agent", "retire", "qa-2"]);
    assert!(
        r.ok().stdout.contains("0 held tasks back in the queue, 1 orphan (`circe orphans`)"),
        "{}",
        r.show()
    );
    let o = task("T-2");
    assert!(
        o.ok().stderr.contains("warning: agent qa-2 is retired: no one will claim task T-2"),
        "{}",
        o.show()
    );
    let listed = env.circe(["orphans", "--json"]).run().json();
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 2, "{listed}");
    let again = env.as_("coordinator", &["agent", "retire", "qa-2", "--json"]);
    assert_eq!(again.ok().json()["already"], true, "{}", again.show());
    let p = env.as_("coordinator", &["prime"]);
    assert!(p.ok().stdout.contains("2 orphans left by retired agents"), "{}", p.show());
    assert!(p.stdout.contains("(circe orphans;"), "{}", p.show());
    assert_eq!(env.as_("coordinator", &["prime", "--json"]).json()["orphan_count"], 2);
    assert!(env.as_("qa", &["prime", "--json"]).json()["orphan_count"].is_null());
    let q = env.as_("qa", &["prime"]);
    assert!(!q.ok().stdout.contains("orphan"), "not a coordinator's: {}", q.show());
}

/// `agent retire --json` counts a waiting task addressed to the agent among its orphans.
#[test]
fn retire_counts_a_waiting_task_addressed_to_the_agent() {
    let env = Env::new();
    env.circe(["agent", "add", "qa-2", "--role", "qa"]).run().ok();
    let args = ["send", "--to", "agent:qa-2", "--intent", "task", "--task", "T-1"];
    env.as_("coordinator", &[&args[..], &["--summary", "x"]].concat()).ok();
    let r = env.as_("coordinator", &["agent", "retire", "qa-2", "--json"]);
    assert_eq!(r.ok().json()["orphan_count"], 1, "{}", r.show());
}

/// What `readdress`, `orphans redeliver` and `take` hand on is named by its ids in `--json`:
/// a task by `task_id`, a message by `msg_id` (a task's: its message's).
#[test]
fn readdress_redeliver_and_take_name_their_ids() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let opened = sent_id(
        &env,
        &[
            "--to",
            "agent:engineer",
            "--intent",
            "implement_feature",
            "--task",
            "T-1",
            "--summary",
            "x",
        ],
    );
    let note = sent_id(&env, &["--to", "agent:engineer", "--intent", "inform", "--summary", "fyi"]);
    env.as_("coordinator", &["agent", "retire", "engineer"]).ok();
    let json = |args: &[&str]| {
        let o = env.circe([&["--json"][..], args].concat()).agent("coordinator").run();
        o.ok().json()
    };
    let t = json(&["orphans", "redeliver", "T-1", "--to", "engineer-2"]);
    assert_eq!((&t["task_id"], &t["msg_id"]), (&"T-1".into(), &opened.as_str().into()), "{t}");
    let m = json(&["orphans", "redeliver", &note, "--to", "engineer-2"]);
    assert_eq!((&m["msg_id"], &m["task_id"]), (&note.as_str().into(), &serde_json::Value::Null));
    let r = json(&["readdress", "T-1", "--to", "role:engineer"]);
    assert_eq!((&r["task_id"], &r["msg_id"]), (&"T-1".into(), &opened.as_str().into()), "{r}");
    let again = json(&["readdress", "T-1", "--to", "role:engineer"]);
    assert_eq!((&again["already"], &again["task_id"]), (&true.into(), &"T-1".into()), "{again}");
    let take = |key: &str| env.circe(["--json", "take", key]).agent("engineer-2").run().json();
    assert_eq!(take(&note)["msg_id"], note.as_str());
    assert_eq!(take(&note)["already"], true);
    assert_eq!(take(&note)["msg_id"], note.as_str(), "run again: the same id");
    env.as_("engineer-2", &["claim", "T-1"]).ok();
    assert_eq!(take("T-1")["msg_id"], opened.as_str(), "a task's: its message's");
}

/// A coordinator's `prime` counts the messages `orphans` lists: every message in a retired
/// agent's INBOX and WORKSPACE but a task's own message (its ticket), so a second message of
/// a task whose ticket lies there counts, as do one naming a task that does not exist and
/// one of no task.
#[test]
fn prime_counts_the_orphan_messages_orphans_lists() {
    let env = Env::new();
    env.circe(["agent", "add", "gone", "--role", "engineer"]).run().ok();
    let send = |args: &[&str]| {
        let to = ["send", "--to", "agent:gone"];
        env.as_("coordinator", &[&to[..], args].concat()).ok();
    };
    for t in ["K-1", "K-2"] {
        send(&["--intent", "task", "--task", t, "--summary", t]);
        env.as_("gone", &["claim", t]).ok();
    }
    // K-2's ticket and a message of K-2 lie in the WORKSPACE.
    env.as_("gone", &["take", "K-2"]).ok();
    send(&["--intent", "inform", "--task", "K-2", "--summary", "of K-2", "--msg-id", "m-2"]);
    env.as_("gone", &["take", "m-2"]).ok();
    for t in ["K-1", "K-2"] {
        env.as_("gone", &["status", t, "in_progress"]).ok();
        env.as_("gone", &["status", t, "completed"]).ok();
    }
    send(&["--intent", "inform", "--task", "K-1", "--summary", "of K-1"]);
    send(&["--intent", "inform", "--task", "NONE-1", "--summary", "of no task there is"]);
    send(&["--intent", "inform", "--summary", "of no task"]);
    env.as_("coordinator", &["agent", "retire", "gone"]).ok();
    let listed = env.circe(["orphans", "--json"]).run().json();
    let mut tasks: Vec<String> = listed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{} {}", m["box"].as_str().unwrap(), m["task_id"].as_str().unwrap_or("-")))
        .collect();
    tasks.sort();
    assert_eq!(
        tasks,
        ["inbox:gone -", "inbox:gone K-1", "inbox:gone NONE-1", "workspace:gone K-2"],
        "{listed}"
    );
    let p = env.as_("coordinator", &["prime", "--json"]);
    assert_eq!(p.ok().json()["orphan_count"], 4, "{}", p.show());
    let p = env.as_("coordinator", &["prime"]);
    assert!(p.ok().stdout.contains("  4 orphans left by retired agents"), "{}", p.show());
}
