//! circe speaks TX (reference 000 and 001, PROTOCOLS.md section 16): every example message of
//! reference 000 sent, and imported from a TX folder, with the outcome the reference
//! describes; the bridge's round trip; addresses; deadlines; orphans; routing on load.

use std::path::Path;

use serde_json::Value;

use crate::common::{Env, assert_unchanged};

const ASK: &str = include_str!("../../src/message/testdata/tx_ask.md");
const ASK_RESPONSE: &str = include_str!("../../src/message/testdata/tx_ask_response.md");
const TASK: &str = include_str!("../../src/message/testdata/tx_task.md");
const TASK_COMPLETE: &str = include_str!("../../src/message/testdata/tx_task_complete.md");
const UPDATE: &str = include_str!("../../src/message/testdata/tx_update.md");
const PROMPT: &str = include_str!("../../src/message/testdata/tx_prompt.md");
const EX1_ASK: &str = include_str!("../../src/message/testdata/tx_ex1_ask.md");
const EX1_RESPONSE: &str = include_str!("../../src/message/testdata/tx_ex1_response.md");
const EX2_TASK: &str = include_str!("../../src/message/testdata/tx_ex2_task.md");
const EX2_COMPLETE: &str = include_str!("../../src/message/testdata/tx_ex2_complete.md");
const EX3_UPDATE: &str = include_str!("../../src/message/testdata/tx_ex3_update.md");

/// A root that speaks for reference 000's meshes: agents core (the coordinator), brain and
/// interviewer; `code-review/coordinator` is the init's coordinator.
fn tx_root() -> Env {
    let env = Env::new();
    let cfg = env.read("circe.yaml");
    env.set_config(&format!("{cfg}tx:\n  aliases: [core, brain, code-review, research-abc123]\n"));
    for (a, r) in [("core", "coordinator"), ("brain", "engineer"), ("interviewer", "engineer")] {
        env.circe(["agent", "add", a, "--role", r]).run().ok();
    }
    env
}

/// `circe --agent AGENT send --file -` with `text` on stdin.
fn send(env: &Env, agent: &str, text: &str) -> crate::common::Out {
    env.circe(["send", "--file", "-", "--json"]).agent(agent).stdin(text.as_bytes()).run()
}

fn asks(env: &Env) -> Vec<Value> {
    let o = env.circe(["asks", "--json"]).run();
    o.ok();
    o.json()["asks"].as_array().unwrap().clone()
}

/// Every example message of reference 000, sent as written (TX's "core" acting as itself),
/// does what the reference says: an ask waits until its response; a task opens a task its
/// task-complete closes; an update is delivered and awaits nothing; a prompt from system
/// becomes the agent's current prompt. The minimal examples, without headline, timestamp or
/// requester, are accepted with circe's defaults (the time of sending).
#[test]
fn every_reference_example_sent_does_what_it_says() {
    let env = tx_root();
    // ask / ask-response (the long examples, then Example 1).
    for (ask, response, id) in
        [(ASK, ASK_RESPONSE, "ask-brain-001"), (EX1_ASK, EX1_RESPONSE, "ask-001")]
    {
        send(&env, "core", ask).ok();
        assert_eq!(env.ls("AGENTS/brain/INBOX").len(), if id == "ask-001" { 2 } else { 1 });
        let open = asks(&env);
        assert_eq!(open.len(), 1, "{open:?}");
        assert_eq!(open[0]["msg_id"], id);
        send(&env, "brain", response).ok();
        assert!(asks(&env).is_empty(), "the response closed {id}");
    }
    assert_eq!(env.ls("AGENTS/core/INBOX").len(), 2, "both answers reached core");
    // task / task-complete (the long example, then Example 2): the task's msg-id is its id.
    for (task, complete, id) in
        [(TASK, TASK_COMPLETE, "task-review-001"), (EX2_TASK, EX2_COMPLETE, "task-001")]
    {
        let o = send(&env, "core", task);
        o.ok();
        assert_eq!(o.json()["task"]["task_id"], id);
        assert_eq!(env.record(id).status.as_str(), "new");
        assert_eq!(env.record(id).to, "coordinator");
        env.as_("coordinator", &["claim", id]).ok();
        send(&env, "coordinator", complete).ok();
        assert_eq!(env.record(id).status.as_str(), "completed", "{id}");
    }
    assert_eq!(env.ls("AGENTS/core/INBOX").len(), 4, "both completions reached core");
    // update (the long example, then Example 3): delivered, nothing awaited.
    for u in [UPDATE, EX3_UPDATE] {
        send(&env, "brain", u).ok();
    }
    assert_eq!(env.ls("AGENTS/core/INBOX").len(), 6);
    assert!(asks(&env).is_empty());
    // prompt: from system, sent by a coordinator, becomes interviewer's current prompt.
    send(&env, "core", PROMPT).ok();
    let prompt = env.read("AGENTS/interviewer/prompt.md");
    assert!(prompt.contains("You are the interviewer agent"), "{prompt}");
    assert_eq!(env.ls("AGENTS/interviewer/INBOX").len(), 1);
    env.circe(["doctor"]).run().ok();
}

/// Fail-closed: an ask-response that answers no open ask addressed to its sender, a second
/// answer, a task whose msg-id cannot be a task id, a mesh that is not this root: each is
/// refused (exit 3) with its reason, and changes nothing.
#[test]
fn tx_refusals_say_why_and_write_nothing() {
    let env = tx_root();
    send(&env, "core", EX1_ASK).ok();
    let before = env.state();
    for (agent, text, says) in [
        ("brain", "---\nto: core\ntype: ask-response\n---\nx\n", "must name the ask"),
        ("brain", "---\nto: core\ntype: ask-response\nin-reply-to: nope\n---\nx\n", "names no ask"),
        (
            "interviewer",
            "---\nto: core\ntype: ask-response\nin-reply-to: ask-001\n---\nx\n",
            "not to interviewer",
        ),
        (
            "brain",
            "---\nto: interviewer\ntype: ask-response\nin-reply-to: ask-001\n---\nx\n",
            "goes to the asker",
        ),
        ("core", "---\nto: brain\ntype: task\nmsg-id: review.v2\n---\nx\n", "not one"),
        ("core", "---\nto: other-mesh/brain\ntype: update\n---\nx\n", "names mesh `other-mesh`"),
        (
            "core",
            "---\nto: brain\ntype: update\ndeadline: 2020-01-01T00:00:00Z\n---\nx\n",
            "deadline",
        ),
        ("brain", "---\nto: interviewer\nfrom: system\ntype: prompt\n---\nx\n", "from"),
    ] {
        let o = send(&env, agent, text);
        o.code(3);
        let err = o.json()["error"].clone();
        assert!(err["message"].as_str().unwrap().contains(says), "{says}: {err}");
        assert!(err["hint"].is_string(), "{says}: a hint: {err}");
    }
    let o = send(&env, "brain", "---\nto: core\ntype: ask-response\nin-reply-to: nope\n---\nx\n");
    assert!(
        o.json()["error"]["hint"].as_str().unwrap().contains("ask-001"),
        "the open ask is named"
    );
    assert_unchanged(&before, &env.state());
    send(&env, "brain", EX1_RESPONSE).ok();
    let o = send(&env, "brain", &EX1_RESPONSE.replace("response-001", "response-002"));
    o.code(3);
    let msg = o.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("answered already"), "{msg}");
}

/// TX file names for the examples (Example 2's task is addressed to code-review/coordinator).
const FOLDER: [(&str, &str); 11] = [
    ("1030100000-ask-core--brain-ask-brain-001.md", ASK),
    ("1030100500-ask-response-brain--core-response-ask-brain-001.md", ASK_RESPONSE),
    ("1030100000-task-core--coordinator-task-review-001.md", TASK),
    ("1030120000-task-complete-coordinator--core-complete-review-001.md", TASK_COMPLETE),
    ("1030110000-update-brain--core-update-spec-graph-001.md", UPDATE),
    ("1103080000-prompt-system--interviewer-prompt-1730628000.md", PROMPT),
    ("1102083000-ask-core--brain-ask-001.md", EX1_ASK),
    ("1102084512-ask-response-brain--core-response-001.md", EX1_RESPONSE),
    ("1102083000-task-core--coordinator-task-001.md", EX2_TASK),
    ("1102091530-task-complete-coordinator--core-complete-001.md", EX2_COMPLETE),
    ("1102093000-update-brain--core-update-001.md", EX3_UPDATE),
];

/// Files TX itself writes: `status: pending`, a bare `to:`, a reply with no status or
/// timestamp, no trailing newline, and the older `>` names.
const TX_OWN: [(&str, &str); 3] = [
    (
        "1102100000-task-core>brain-job-7.md",
        "---\nto: brain\nfrom: core/core\ntype: task\nstatus: pending\nmsg-id: job-7\n---\n\nIndex the repo.",
    ),
    (
        "1102100500-ask-brain>core-q-8.md",
        "---\nto: core/core\nfrom: brain/brain\ntype: ask\nmsg-id: q-8\n---\n\nWhich branch?",
    ),
    (
        "1102101000-update-core>brain-u-9.md",
        "---\nto: brain\nfrom: core\ntype: update\nmsg-id: u-9\nin-reply-to: job-7\n---\nfyi",
    ),
];

fn write_folder(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (n, t) in files {
        std::fs::write(dir.join(n), t).unwrap();
    }
}

/// A TX folder imports into a fresh root: agents added from `mesh/agent`, history as history
/// (answered asks and completed tasks in LOGS), what is open stays open, replies keep their
/// thread; an unreadable file is reported and the rest imported; export gives every file
/// back byte for byte under its own name; a second import changes nothing.
#[test]
fn a_tx_folder_imports_and_exports_byte_for_byte() {
    let env = Env::new();
    let src = env.path().join("tx-msgs");
    let mut files: Vec<(&str, &str)> = FOLDER.to_vec();
    files.extend(TX_OWN);
    files.push(("1102110000-update-core--brain-bad.md", "---\nto: [brain\n---\nbroken\n"));
    write_folder(&src, &files);
    // A --role it cannot use (a name no agent could have, or that no message names) is
    // refused, and nothing is imported: the agent would keep the default role for good.
    let before = env.state();
    for (given, says) in [
        ("Brain=engineer", "capital letters"),
        ("br ain=engineer", "contains ' '"),
        ("brian=engineer", "no message of the folder names an agent `brian`"),
    ] {
        let o = env.circe(["import", "tx", src.to_str().unwrap(), "--role", given]).run();
        assert_eq!(o.code, 3, "{}", o.show());
        assert!(o.stderr.contains(says), "{}", o.show());
        assert_unchanged(&before, &env.state());
    }
    let o = env.circe(["import", "tx", src.to_str().unwrap(), "--role", "brian=engineer"]).run();
    assert!(o.stderr.contains("the agents this import adds: brain, core"), "{}", o.show());
    // Two roles for one agent, or a role mistyped: said, naming the flag, nothing imported.
    let dir = src.to_str().unwrap();
    let twice = env.circe(["import", "tx", dir, "--role", "brain=qa", "--role", "brain=scribe"]);
    let o = twice.run();
    o.code(2);
    assert!(o.stderr.contains("two roles, `qa` and `scribe`"), "{}", o.show());
    let o = env.circe(["import", "tx", dir, "--role", "brain=enginer"]).run();
    o.code(5);
    assert!(o.stderr.contains("--role brain=enginer: unknown role"), "{}", o.show());
    assert!(o.stderr.contains("did you mean `engineer`?"), "{}", o.show());
    let o = env.circe(["import", "tx", dir, "--default-role", "enginer"]).run();
    o.code(5);
    assert!(o.stderr.contains("--default-role: unknown role"), "{}", o.show());
    assert_unchanged(&before, &env.state());
    let o = env
        .circe(["import", "tx", src.to_str().unwrap(), "--role", "brain=engineer", "--json"])
        .run();
    o.ok();
    let r = o.json();
    assert_eq!(r["history"], 12, "the 11 examples (all answered or completed) and u-9: {r}");
    assert_eq!((r["open_asks"].clone(), r["open_tasks"].clone()), (1.into(), 1.into()), "{r}");
    assert_eq!(r["skipped"].as_array().unwrap().len(), 1, "{r}");
    assert!(r["skipped"][0]["reason"].as_str().unwrap().contains("YAML"), "{r}");
    assert!(o.stderr.contains("tx: {aliases:"), "the meshes are named: {}", o.stderr);
    let agents = env.circe(["agent", "list", "--json"]).run().json();
    let names: Vec<&str> =
        agents["agents"].as_array().unwrap().iter().map(|a| a["agent"].as_str().unwrap()).collect();
    for a in ["core", "brain", "interviewer"] {
        assert!(names.contains(&a), "{a} added: {names:?}");
    }
    assert_eq!(env.record("job-7").status.as_str(), "new", "the open task waits");
    assert_eq!(env.record("job-7").to, "brain");
    let open = asks(&env);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["msg_id"], "q-8");
    assert_eq!(
        env.circe(["asks", "--all", "--json"]).run().json()["asks"].as_array().unwrap().len(),
        3
    );
    assert!(env.read("AGENTS/interviewer/prompt.md").contains("interviewer agent"));
    // The update replying to job-7 joined its task.
    let thread = env.circe(["thread", "u-9", "--json"]).run();
    thread.ok();
    assert_eq!(thread.json()["msg_id"], "job-7");
    assert_eq!(thread.json()["replies"][0]["task_id"], "job-7");
    env.circe(["doctor"]).run().ok();
    // Export: every imported file back, byte for byte, under its name.
    let out = env.path().join("exported");
    env.circe(["export", "tx", out.to_str().unwrap()]).run().ok();
    for (n, t) in files.iter().filter(|(n, _)| !n.ends_with("-bad.md")) {
        let back = std::fs::read(out.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert_eq!(back, t.as_bytes(), "{n}");
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), files.len() - 1);
    // Again: the msg-ids are there already; nothing changes.
    let before = env.state();
    let again = env.circe(["import", "tx", src.to_str().unwrap(), "--json"]).run();
    again.ok();
    assert_eq!(again.json()["skipped"].as_array().unwrap().len(), files.len());
    assert_unchanged(&before, &env.state());
    // Once `circe archive` took the history, an import run again brings none of it back
    // (a database root keeps no archive).
    if env.url.is_some() {
        return;
    }
    let later = "2031-01-01T00:00:00Z";
    let archived = env.circe(["archive", "--json"]).now(later).run();
    archived.ok();
    assert!(archived.json()["message_count"].as_u64().unwrap_or(0) > 0, "{}", archived.show());
    let before = env.state();
    let again = env.circe(["import", "tx", src.to_str().unwrap(), "--json"]).now(later).run();
    again.ok();
    assert_eq!(again.json()["history"], 0, "{}", again.show());
    assert_unchanged(&before, &env.state());
}

/// Two messages that export under one name (imported from two folders that each held a file
/// so named): the export writes one file, the one it finds last, as it did when it gathered
/// the whole export before writing, and counts it once; it reports no clash with itself,
/// and a second export finds that file there already.
#[test]
fn two_messages_exported_under_one_name_leave_one_file() {
    let env = Env::new();
    let name = "1101100000-update-core--brain-same.md";
    let text = |id: &str| {
        format!(
            "---\nto: brain\nfrom: core\ntype: update\nstatus: complete\nmsg-id: {id}\ntimestamp: 2025-11-01T10:00:00Z\n---\n\nfrom {id}\n"
        )
    };
    for id in ["a-1", "b-1"] {
        let dir = env.path().join(id);
        write_folder(&dir, &[(name, &text(id))]);
        env.circe(["import", "tx", dir.to_str().unwrap()]).run().ok();
    }
    let out = env.path().join("exported");
    let o = env.circe(["--json", "export", "tx", out.to_str().unwrap()]).run();
    o.ok();
    assert_eq!(o.stderr, "", "{}", o.show());
    let j = o.json();
    assert_eq!(j["files"], serde_json::json!([name]), "{}", o.show());
    assert_eq!((&j["written_count"], &j["unchanged_count"]), (&1.into(), &0.into()), "{j}");
    assert_eq!(j["kept"], serde_json::json!([]), "{j}");
    let files: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files, [name], "nothing else (no temp file) is left");
    // LOGS lists b-1's copy (`..._update.2.md`) before a-1's (`..._update.md`): a-1's is
    // found last.
    assert_eq!(std::fs::read_to_string(out.join(name)).unwrap(), text("a-1"));
    let o = env.circe(["--json", "export", "tx", out.to_str().unwrap()]).run();
    let j = o.ok().json();
    assert_eq!((&j["written_count"], &j["unchanged_count"]), (&0.into(), &1.into()), "{j}");
    assert_eq!(o.stderr, "", "{}", o.show());
}

/// An import whose only file is an open ask (or a prompt) to an agent the import itself
/// adds: the ask lands in that agent's INBOX, open, and the prompt becomes its prompt (what
/// was read of the agents before they were added is read again).
#[test]
fn an_open_ask_to_an_agent_the_import_adds_lands_in_its_inbox() {
    let env = Env::new();
    let src = env.path().join("tx-ask");
    let ask = "---\ntype: ask\nstatus: start\nmsg-id: past1\nheadline: past\n---\n\nq\n";
    write_folder(&src, &[("0101235959-ask-core--brain-past1.md", ask)]);
    let o = env.circe(["import", "tx", src.to_str().unwrap(), "--json"]).run();
    o.ok();
    assert_eq!(o.json()["open_asks"], 1, "{}", o.show());
    assert_eq!(env.ls("AGENTS/brain/INBOX").len(), 1, "{}", o.show());
    assert_eq!(asks(&env).len(), 1);
    let src = env.path().join("tx-prompt");
    let prompt = "---\ntype: prompt\nfrom: system\nmsg-id: p-1\n---\n\nYou are the scout.\n";
    write_folder(&src, &[("0101235959-prompt-system--scout-p-1.md", prompt)]);
    env.circe(["import", "tx", src.to_str().unwrap()]).run().ok();
    assert!(env.read("AGENTS/scout/prompt.md").contains("You are the scout."));
    // prime shows it.
    let p = env.as_("scout", &["prime"]);
    assert!(
        p.stdout.contains("Your prompt (from system") && p.stdout.contains("  You are the scout."),
        "{}",
        p.show()
    );
    let p = env.as_("scout", &["prime", "--json"]).json();
    assert_eq!(p["prompt"]["text"].as_str().map(str::trim), Some("You are the scout."), "{p}");
    assert!(env.as_("qa", &["prime", "--json"]).json()["prompt"].is_null());
}

/// Refusals whose hints lead somewhere: `from: system` on what is no prompt, a task-complete
/// that names no task (in flags, as it was sent), a file that is not there.
#[test]
fn refusal_hints_lead_somewhere() {
    let env = tx_root();
    let o = send(&env, "core", "---\nto: brain\nfrom: system\ntype: update\n---\nx\n");
    o.code(3);
    assert!(
        o.json()["error"]["hint"].as_str().unwrap().contains("only a `prompt`"),
        "{}",
        o.show()
    );
    let o =
        env.as_("brain", &["send", "--to", "core", "--intent", "task-complete", "--summary", "x"]);
    o.code(3);
    assert!(o.stderr.contains("--task ID") && o.stderr.contains("--in-reply-to"), "{}", o.show());
    // `agent:NAME` asks for an agent only, and is told of agents only.
    let o =
        env.as_("core", &["send", "--to", "agent:enginer", "--intent", "update", "--summary", "x"]);
    o.code(5);
    assert!(
        o.stderr.contains("no agent `enginer`") && o.stderr.contains("did you mean `engineer`?"),
        "{}",
        o.show()
    );
    // A durability that is none names where it came from.
    let o = env.circe(["tasks"]).var("CIRCE_DURABILITY", "bogus").run();
    o.code(3);
    assert!(
        o.stderr.contains("CIRCE_DURABILITY: `bogus`") && o.stderr.contains("hint: full:"),
        "{}",
        o.show()
    );
    let o = env.circe(["seq", "import", "nonexist.json"]).run();
    o.code(5);
    assert!(
        o.stderr.contains("hint: a relative path is read from the current folder"),
        "{}",
        o.show()
    );
    // An absolute path is not read from the current folder: the hint says where to look.
    let here = env.path().join("nonexist.yaml");
    let o = env.circe(["config", "--set", here.to_str().unwrap()]).run();
    o.code(5);
    let ls = format!("hint: check the name: `ls {}` lists that folder", env.path().display());
    assert!(o.stderr.contains(&ls), "{}", o.show());
    let deeper = env.path().join("nofolder/nonexist.yaml");
    let o = env.circe(["config", "--set", deeper.to_str().unwrap()]).run();
    o.code(5);
    assert!(o.stderr.contains("nofolder does not exist either"), "{}", o.show());
}

/// An ask sent with flags is listed by its summary; what an ask lacks is `null` in the JSON.
#[test]
fn an_ask_is_listed_by_its_summary_with_nulls_for_what_it_lacks() {
    let env = tx_root();
    env.as_("core", &["send", "--to", "brain", "--intent", "ask", "--summary", "which db?"]).ok();
    let o = env.circe(["asks"]).run();
    assert!(o.stdout.contains("which db?"), "{}", o.show());
    let a = env.circe(["asks", "--json"]).run().json();
    let ask = &a["asks"][0];
    assert_eq!(ask["summary"], "which db?", "{a}");
    for k in ["deadline", "answer", "answered_by", "answered_at", "task_id"] {
        assert!(ask.get(k).is_some_and(Value::is_null), "{k}: {a}");
    }
}

/// `asks --json` names when an ask was made `created_at`, as every command names a
/// message's time (the ask's record keeps `asked_at`).
#[test]
fn asks_json_names_the_time_created_at() {
    let env = tx_root();
    env.as_("core", &["send", "--to", "brain", "--intent", "ask", "--summary", "which db?"]).ok();
    let a = env.circe(["asks", "--json"]).run().json();
    let ask = &a["asks"][0];
    assert_eq!(ask["created_at"], "2025-11-21T17:00:00Z", "{a}");
    assert!(ask.get("asked_at").is_none(), "{a}");
}

/// An answer to an asker whose name is also a role's goes to the asker alone, not to the
/// whole role.
#[test]
fn an_ask_response_reaches_the_asker_alone() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.as_(
        "engineer",
        &[
            "send",
            "--to",
            "qa",
            "--intent",
            "ask",
            "--summary",
            "q",
            "--msg-id",
            "20251121T170000000Z-ask00001",
        ],
    )
    .ok();
    let args = ["send", "--to", "engineer", "--intent", "ask-response", "--summary", "a"];
    let o = env.as_(
        "qa",
        &[&args[..], &["--in-reply-to", "20251121T170000000Z-ask00001", "--json"]].concat(),
    );
    o.ok();
    let doc = o.json();
    let boxes: Vec<&str> =
        doc["delivered"].as_array().unwrap().iter().map(|c| c["box"].as_str().unwrap()).collect();
    assert_eq!(boxes, ["inbox:engineer"], "{}", o.show());
    assert!(env.ls("AGENTS/engineer-2/INBOX").is_empty());
}

/// A task completes once: a second task-complete (another message) is refused with a way to
/// say more; the first, sent again with its own id, is answered with its delivery.
#[test]
fn a_task_completes_once() {
    let env = Env::new();
    env.open_task("T-1");
    env.as_("engineer", &["claim", "T-1"]).ok();
    env.as_("engineer", &["status", "T-1", "in_progress"]).ok();
    env.as_("engineer", &["check", "T-1", "tests_passed=true"]).ok();
    let args = ["send", "--to", "coordinator", "--intent", "task-complete", "--task", "T-1"];
    let first =
        [&args[..], &["--summary", "done", "--msg-id", "20251121T170000000Z-done0001", "--json"]]
            .concat();
    env.as_("engineer", &first).ok();
    let again = env.as_("engineer", &first);
    again.ok();
    assert_eq!(again.json()["already_delivered"], true, "{}", again.show());
    let o = env.as_("engineer", &[&args[..], &["--summary", "done again"]].concat());
    o.code(3);
    assert!(
        o.stderr.contains("completed already") && o.stderr.contains("--intent update"),
        "{}",
        o.show()
    );
}

/// What circe itself writes exports in TX's naming, as front matter TX reads.
#[test]
fn circe_messages_export_in_tx_naming() {
    let env = tx_root();
    let cfg = env.read("circe.yaml").replacen("tx:\n", "tx:\n  mesh: hub\n", 1);
    env.set_config(&cfg);
    // Never into a root's folder: copies of its messages would land in its boxes.
    if !crate::common::pg_mode() {
        let inbox = env.root().join("AGENTS/brain/INBOX");
        let o = env.circe(["export", "tx", inbox.to_str().unwrap()]).run();
        assert_eq!(o.code, 3, "{}", o.show());
        assert!(o.stderr.contains("lies inside the root"), "{}", o.show());
    }
    env.as_("coordinator", &["send", "--to", "brain", "--intent", "update", "--summary", "hello"])
        .ok();
    let out = env.path().join("out");
    env.circe(["export", "tx", out.to_str().unwrap()]).run().ok();
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1);
    assert!(names[0].starts_with("1121170000-update-coordinator--brain-"), "{names:?}");
    let text = std::fs::read_to_string(out.join(&names[0])).unwrap();
    assert!(
        text.starts_with("---\nfrom: hub/coordinator\nto: hub/brain\ntype: update\n"),
        "{text}"
    );
    // Its status in TX's words: a new message starts.
    assert!(text.contains("\nstatus: start\n") && !text.contains("status: new"), "{text}");
    // Exporting again writes nothing new and replaces nothing.
    let o = env.circe(["export", "tx", out.to_str().unwrap(), "--json"]).run();
    assert_eq!(o.json()["written_count"], 0);
}

/// `circe thread` prints the conversation as a tree from its first message.
#[test]
fn a_thread_is_a_tree() {
    let env = tx_root();
    send(&env, "core", EX1_ASK).ok();
    send(&env, "brain", EX1_RESPONSE).ok();
    send(
        &env,
        "core",
        "---\nto: brain\ntype: update\nmsg-id: thanks-1\nin-reply-to: response-001\n---\nThanks.\n",
    )
    .ok();
    let o = env.circe(["thread", "thanks-1"]).run();
    o.ok();
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", o.stdout);
    assert!(lines[0].starts_with("ask-001  core/core -> brain/brain  ask  "), "{}", o.stdout);
    assert!(
        lines[1].starts_with("└─ response-001  brain/brain -> core/core  ask-response"),
        "{}",
        o.stdout
    );
    assert!(lines[2].starts_with("   └─ thanks-1  core -> brain  update"), "{}", o.stdout);
    assert!(lines[0].ends_with("What is the primary programming language?"), "{}", o.stdout);
    env.circe(["thread", "nope"]).run().code(5);
    // A message sent with --summary is shown by its summary, not its `## Summary` heading.
    let args = ["send", "--to", "brain", "--intent", "update", "--in-reply-to", "thanks-1"];
    env.as_("core", &[&args[..], &["--summary", "all hands"]].concat()).ok();
    let o = env.circe(["thread", "thanks-1", "--json"]).run();
    assert_eq!(
        o.json()["replies"][0]["replies"][0]["replies"][0]["summary"],
        "all hands",
        "{}",
        o.show()
    );
}

/// A chain of replies deeper than 32 levels: nested down to the 32nd, the rest listed flat
/// under it, each saying what it answers (an endless chain neither overflows the stack nor
/// grows its output by an indent per reply).
#[test]
fn a_long_chain_of_replies_nests_32_levels_deep() {
    let env = tx_root();
    for i in 0..40 {
        let re = if i == 0 { String::new() } else { format!("in-reply-to: c{}\n", i - 1) };
        let text = format!("---\nto: brain\ntype: update\nmsg-id: c{i}\n{re}---\nr{i}\n");
        send(&env, "core", &text).ok();
    }
    let o = env.circe(["thread", "c39"]).run();
    o.ok();
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 40, "{}", o.stdout);
    let indent = |l: &str| l.find('c').unwrap();
    assert!(indent(lines[32]) < indent(lines[33]), "{}", o.stdout);
    assert_eq!(indent(lines[33]), indent(lines[39]), "{}", o.stdout);
    assert!(!lines[33].ends_with("(re c32)"), "listed under c32: {}", lines[33]);
    assert!(lines[34].ends_with("r34  (re c33)"), "{}", lines[34]);
    assert!(lines[39].ends_with("r39  (re c38)"), "{}", lines[39]);
    let j = env.circe(["thread", "c0", "--json"]).run().json();
    let mut n = &j;
    for _ in 0..32 {
        n = &n["replies"][0];
    }
    assert_eq!((n["msg_id"].as_str(), n["in_reply_to"].as_str()), (Some("c32"), Some("c31")));
    let flat: Vec<&str> =
        n["replies"].as_array().unwrap().iter().map(|r| r["msg_id"].as_str().unwrap()).collect();
    assert_eq!(flat, ["c33", "c34", "c35", "c36", "c37", "c38", "c39"]);
    assert_eq!(j["in_reply_to"], serde_json::Value::Null);
}

/// Deadlines: past it a task is not claimed; `reap` expires it and tells the coordinators;
/// the board shows it (and priorities).
#[test]
fn a_deadline_expires_a_task() {
    let env = tx_root();
    send(&env, "core", "---\nto: brain\ntype: task\nmsg-id: d-1\npriority: critical\ndeadline: 2025-11-21T18:00:00Z\n---\nby six\n").ok();
    let board = env.circe(["tasks"]).run();
    assert!(board.stdout.contains("d-1   new     -      high"), "{}", board.stdout);
    let late = "2025-11-21T18:00:01Z";
    let o = env.at(late, "brain", &["claim", "d-1"]);
    o.code(3);
    assert!(o.stderr.contains("deadline") && o.stderr.contains("hint:"), "{}", o.stderr);
    let r = env.circe(["reap"]).now(late).run();
    r.ok();
    assert!(r.stdout.contains("d-1: deadline passed -> expired"), "{}", r.stdout);
    assert_eq!(env.record("d-1").status.as_str(), "expired");
    assert_eq!(env.ls("LOGS").len(), 1, "its message is history");
    assert_eq!(env.ls("AGENTS/coordinator/INBOX").len(), 1, "the coordinator is told");
    env.at(late, "brain", &["claim", "d-1"]).code(3);
    let rows = env.circe(["tasks", "--status", "expired", "--json"]).run().json();
    assert_eq!(rows["tasks"].as_array().unwrap().len(), 1);
    env.circe(["doctor"]).run().ok();
}

/// A held task past its deadline: the holder's `prime` shows the deadline before and says it
/// passed after; `reap` tells the holder too (a copy, `cc`), and completing it then says the
/// status is final and how to go on, not which statuses `completed` needs.
#[test]
fn the_holder_of_a_task_sees_its_deadline_and_is_told_when_it_expires() {
    let env = Env::new();
    env.open_task_due("D-1", "role:engineer", "2025-11-21T18:00:00Z");
    let before = "2025-11-21T17:00:00Z";
    env.at(before, "engineer", &["claim", "D-1"]).ok();
    let p = env.at(before, "engineer", &["prime"]);
    assert!(
        p.ok().stdout.contains("deadline 2025-11-21T18:00:00Z): finish it before"),
        "{}",
        p.show()
    );
    let p = env.at(before, "engineer", &["prime", "--json"]);
    assert_eq!(p.json()["held"][0]["deadline"], "2025-11-21T18:00:00Z", "{}", p.show());
    let late = "2025-11-21T18:00:01Z";
    let p = env.at(late, "engineer", &["prime"]);
    assert!(
        p.ok().stdout.contains("its deadline passed, so it can no longer be completed"),
        "{}",
        p.show()
    );
    env.circe(["reap"]).now(late).run().ok();
    let told = env.ls("AGENTS/engineer/INBOX");
    assert_eq!(told.len(), 1, "the holder is told: {told:?}");
    let notice = std::fs::read_to_string(env.root().join("AGENTS/engineer/INBOX").join(&told[0]));
    assert!(notice.unwrap().contains("task D-1 expired"));
    assert_eq!(env.ls("AGENTS/coordinator/INBOX").len(), 1, "and the coordinator");
    let o = env.at(late, "engineer", &["status", "D-1", "completed"]);
    o.code(3);
    assert!(o.stderr.contains("expired is final (its deadline passed)"), "{}", o.show());
    assert!(o.stderr.contains("open a new task"), "{}", o.show());
    env.circe(["doctor"]).run().ok();
}

/// A retirement cut off between its mark and its event (`retire.marked`): run again, it says
/// the agent was retired already and logs the retirement the log lacked, once.
#[test]
fn a_retirement_cut_off_before_its_event_is_logged_when_run_again() {
    let env = tx_root();
    let retires = |env: &Env| {
        env.events().iter().filter(|e| e["event"] == "retire" && e["owner"] == "brain").count()
    };
    let cut = env.circe(["agent", "retire", "brain"]).agent("core");
    cut.var("CIRCE_CRASH_AT", "retire.marked").run().code(86);
    assert_eq!(retires(&env), 0, "cut off before its event");
    let again = env.as_("core", &["agent", "retire", "brain", "--json"]);
    again.ok();
    assert_eq!(again.json()["already"], true, "{}", again.show());
    assert_eq!(again.json()["retired"], true, "its state, as agent list says it: {}", again.show());
    assert_eq!(retires(&env), 1, "the run again logs it");
    env.as_("core", &["agent", "retire", "brain"]).ok();
    assert_eq!(retires(&env), 1, "logged once");
}

/// A retirement run again after the archive took the log that told of it logs nothing:
/// the log held in LOGS starts after the retirement, so whether it was logged cannot be
/// read there, and no second event is made.
#[test]
fn a_retirement_run_again_after_the_archive_took_its_event_logs_none() {
    local_only!("the archive is the local engine's");
    let env = tx_root();
    env.as_("core", &["agent", "retire", "brain"]).ok();
    env.circe(["archive", "--older-than", "1s"]).now("2031-01-01T00:00:00Z").run().ok();
    let retires = |env: &Env| {
        env.events().iter().filter(|e| e["event"] == "retire" && e["owner"] == "brain").count()
    };
    assert_eq!(retires(&env), 0, "the archive took the part of the log that told of it");
    let again = env.as_("core", &["agent", "retire", "brain", "--json"]);
    assert_eq!(again.ok().json()["already"], true, "{}", again.show());
    assert_eq!(retires(&env), 0, "a second retire event was logged");
}

/// Retirement: held tasks back to the queue, orphans listed (`circe orphans`, doctor) and
/// redelivered by a coordinator; a message to the retired agent is an orphan, not an error.
#[test]
fn a_retired_agent_leaves_orphans() {
    let env = tx_root();
    env.open_task("T-1");
    env.as_("brain", &["claim", "T-1"]).ok();
    send(&env, "core", "---\nto: brain\ntype: update\nmsg-id: u-1\n---\nfyi\n").ok();
    env.as_("engineer", &["agent", "retire", "brain"]).code(3);
    let o = env.as_("core", &["agent", "retire", "brain"]);
    o.ok();
    assert!(o.stdout.contains("1 held task back in the queue"), "{}", o.stdout);
    assert_eq!(env.record("T-1").status.as_str(), "new");
    env.as_("brain", &["inbox"]).code(3);
    // Retirement is final: the name is not given again, whatever role is asked.
    for role in ["engineer", "qa"] {
        let o = env.circe(["agent", "add", "brain", "--role", role]).run();
        assert_eq!(o.code, 3, "{}", o.show());
        assert!(o.stderr.contains("agent brain is retired"), "{}", o.show());
    }
    // The sender is told no one reads it.
    let later = send(&env, "core", "---\nto: brain\ntype: update\nmsg-id: u-2\n---\nlater\n");
    later.ok();
    assert!(
        later.stderr.contains("warning: agent brain is retired: no one reads the copy"),
        "{}",
        later.show()
    );
    let list = env.circe(["orphans", "--json"]).run().json();
    assert_eq!(list["messages"].as_array().unwrap().len(), 2, "{list}");
    let doc = env.circe(["doctor"]).run();
    doc.ok();
    assert!(doc.stderr.contains("2 orphaned messages"), "{}", doc.stderr);
    let r = env.as_("core", &["orphans", "redeliver", "u-1", "--to", "engineer", "--json"]);
    r.ok();
    assert_eq!(env.ls("AGENTS/engineer/INBOX").len(), 1);
    // The agent alone, said as an address (a bare `engineer` would be the role).
    assert_eq!(r.json()["to"], "agent:engineer", "{}", r.show());
    let event = env.events().pop().unwrap();
    assert_eq!(
        (&event["event"], &event["addressed_to"]),
        (&"redeliver".into(), &"agent:engineer".into())
    );
    env.as_("core", &["orphans", "redeliver", "u-2", "--to", "brain"]).code(3);
    let list = env.circe(["orphans", "--json"]).run().json();
    assert_eq!(list["messages"].as_array().unwrap().len(), 1);
}

/// A waiting task addressed to a retired agent as `agent:NAME` is an orphan too, and a
/// task readdressed to an agent whose name is also a role's goes to that agent alone.
#[test]
fn a_task_for_agent_name_is_an_orphan_and_goes_to_the_agent_named() {
    let env = tx_root();
    let args = ["send", "--to", "agent:brain", "--intent", "implement_feature", "--task", "B-1"];
    env.as_("core", &[&args[..], &["--summary", "x"]].concat()).ok();
    env.as_("core", &["agent", "retire", "brain"]).ok();
    let list = env.circe(["orphans", "--json"]).run().json();
    assert_eq!(list["tasks"][0]["task_id"], "B-1", "{list}");
    env.as_("core", &["orphans", "redeliver", "B-1", "--to", "engineer"]).ok();
    assert_eq!(env.record("B-1").to, "agent:engineer");
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.as_("engineer-2", &["claim", "B-1"]).code(3);
    env.as_("engineer", &["claim", "B-1"]).ok();
}

/// An escalation list naming no one (a typo) is refused when the root opens, with the
/// closest name: a parked task would otherwise alert nobody.
#[test]
fn an_escalation_to_no_one_is_refused() {
    let env = Env::new();
    let cfg = env.read("circe.yaml");
    env.set_config(
        &cfg.replace("escalation: [coordinator, rooster]", "escalation: [cordinator, rooster]"),
    );
    let o = env.circe(["tasks"]).run();
    o.code(3);
    assert!(
        o.stderr.contains("`cordinator` is no agent or role")
            && o.stderr.contains("did you mean `coordinator`?"),
        "{}",
        o.show()
    );
    env.circe(["validate", "--config"]).run().code(3);
    // A key circe does not know: refused, naming where and the line, with one `error:`.
    let bad = format!("{cfg}colour: red\n");
    let o = env.circe(["config", "--set", "-"]).stdin(bad.as_bytes()).run();
    o.code(3);
    let said = o.stderr.starts_with("error: standard input (the new circe.yaml): line ");
    assert!(said && o.stderr.contains("unknown field `colour`"), "{}", o.show());
    env.set_config(
        &cfg.replace(
            "escalation: [coordinator, rooster]",
            "escalation: [role:coordinator, agent:qa]",
        ),
    );
    env.circe(["tasks"]).run().ok();
}

/// Routing rules are checked when a root opens: an unknown agent or status is refused (exit
/// 3, naming it) by every command but the setup ones; `validate --config` reports a loop
/// with no terminal state.
#[test]
fn routing_rules_are_checked_on_load() {
    let env = Env::new();
    let cfg = env.read("circe.yaml");
    let with = |routing: &str| env.set_config(&format!("{cfg}routing:\n{routing}"));
    // A mesh that is not this root's: refused with the way out.
    with("  engineer:\n    complete: {other/qa: go}\n");
    let o = env.circe(["validate", "--config"]).run();
    o.code(3);
    assert!(
        o.stderr.contains("names mesh `other`")
            && o.stderr.contains("hint: write the bare agent `qa`"),
        "{}",
        o.show()
    );
    with("  red-phase:\n    complete: {green-phase: Test written}\n");
    let o = env.circe(["tasks"]).run();
    o.code(3);
    assert!(o.stderr.contains("`red-phase` is no agent or role"), "{}", o.stderr);
    // A name near one of the root's is guessed, as escalation's is.
    with("  engineer:\n    complete: {qaa: go}\n");
    let o = env.circe(["tasks"]).run();
    o.code(3);
    assert!(o.stderr.contains("did you mean `qa`?"), "{}", o.stderr);
    with("  red-phase:\n    complete: {green-phase: Test written}\n");
    for a in ["red-phase", "green-phase"] {
        env.circe(["agent", "add", a, "--role", "engineer"]).run().ok();
    }
    env.circe(["tasks"]).run().ok();
    env.circe(["validate", "--config"]).run().ok();
    // A status that is no routing key: refused when the configuration is set, and (a
    // circe.yaml edited by hand) when the root opens.
    let bad = format!("{cfg}routing:\n  red-phase:\n    done: {{green-phase: x}}\n");
    let o = env.circe(["config", "--set", "-"]).stdin(bad.as_bytes()).run();
    o.code(3);
    assert!(o.stderr.contains("unknown status `done`"), "{}", o.stderr);
    if env.url.is_none() {
        let good = env.read("circe.yaml");
        std::fs::write(env.root().join("circe.yaml"), &bad).unwrap();
        let o = env.circe(["tasks"]).run();
        o.code(3);
        assert!(o.stderr.contains("unknown status `done`"), "{}", o.stderr);
        std::fs::write(env.root().join("circe.yaml"), good).unwrap();
    }
    with(
        "  red-phase:\n    complete: {green-phase: go}\n  green-phase:\n    failed: {red-phase: back}\n",
    );
    let o = env.circe(["validate", "--config"]).run();
    o.code(3);
    assert!(
        o.stderr.contains("green-phase, red-phase route only among themselves"),
        "{}",
        o.stderr
    );
    assert!(env.circe(["doctor"]).run().stderr.contains("routing loop"));
    with(
        "  red-phase:\n    complete: {green-phase: go}\n  green-phase:\n    failed: {red-phase: back}\n    blocked: {coordinator: help}\n",
    );
    env.circe(["validate", "--config"]).run().ok();
}

/// An answer cut off between its mark on the ask and its delivery leaves the ask
/// `answering`: doctor reports it, and `--repair` opens it again (the answer never arrived),
/// so the same answer can be sent again.
#[test]
fn an_ask_left_answering_is_reported_and_repaired() {
    local_only!("a crash point of the local engine");
    let env = tx_root();
    send(&env, "core", EX1_ASK).ok();
    let answer = "---\nto: core\ntype: ask-response\nin-reply-to: ask-001\n---\nyes\n";
    let cut = env
        .circe(["send", "--file", "-"])
        .agent("brain")
        .stdin(answer.as_bytes())
        .var("CIRCE_CRASH_AT", "seq.staged")
        .run();
    assert_eq!(cut.code, 86, "{}", cut.show());
    let doc = env.circe(["doctor"]).run();
    assert_eq!(doc.code, 1, "{}", doc.show());
    assert!(doc.stderr.contains("ask ask-001 was left answering"), "{}", doc.show());
    let fixed = env.circe(["doctor", "--repair"]).run();
    assert!(
        fixed.stdout.contains("ask ask-001 was left answering by a command cut off (now open)"),
        "{}",
        fixed.show()
    );
    env.circe(["doctor"]).run().ok();
    send(&env, "brain", answer).ok();
    assert!(asks(&env).is_empty(), "answered");
}

/// An ask's asker is told before the ask expires: `reap` cut off between the two leaves the
/// ask open and its notice delivered; the next `reap` expires it without a second notice.
#[test]
fn an_expired_ask_is_told_once_across_a_cut_off_reap() {
    let env = tx_root();
    let ask = "---\nto: brain\ntype: ask\nmsg-id: dl-1\ndeadline: 2030-01-01T00:10:00Z\n---\n?\n";
    env.circe(["send", "--file", "-"])
        .agent("core")
        .now("2030-01-01T00:00:00Z")
        .stdin(ask.as_bytes())
        .run()
        .ok();
    let later = "2030-01-01T01:00:00Z";
    let notices = || {
        env.ls("AGENTS/core/INBOX")
            .into_iter()
            .filter(|n| env.read(&format!("AGENTS/core/INBOX/{n}")).contains("expired unanswered"))
            .count()
    };
    let cut = env.circe(["reap"]).now(later).var("CIRCE_CRASH_AT", "ask.told").run();
    assert_eq!(cut.code, 86, "{}", cut.show());
    assert_eq!(notices(), 1, "told before it expires");
    let open = env.circe(["asks", "--json"]).now(later).run().json();
    assert_eq!(open["asks"][0]["state"], "open", "{open}");
    env.circe(["reap"]).now(later).run().ok();
    assert_eq!(notices(), 1, "told once");
    let all = env.circe(["asks", "--all", "--json"]).now(later).run().json();
    assert_eq!(all["asks"][0]["state"], "expired", "{all}");
}

/// An ask takes an `ask-response`: an `answer` to it is refused (it would leave the ask open
/// while the asker's questions said answered), naming the intent and the asker; an `update`
/// in reply says more and leaves it open; `questions` tells the intent to answer with.
#[test]
fn an_ask_is_answered_by_an_ask_response_only() {
    let env = Env::new();
    let o = env.as_(
        "qa",
        &["send", "--to", "engineer", "--intent", "ask", "--summary", "floats?", "--json"],
    );
    o.ok();
    let id = o.json()["msg_id"].as_str().unwrap().to_string();
    let q = env.as_("engineer", &["questions"]);
    let answer = format!(
        "--intent ask-response --in-reply-to {id} --summary \"...\" (it goes to the asker)"
    );
    assert!(q.stdout.contains(&answer), "{}", q.show());
    let before = env.state();
    let reply = |intent: &str| {
        env.as_(
            "engineer",
            &[
                "send",
                "--to",
                "agent:qa",
                "--intent",
                intent,
                "--in-reply-to",
                &id,
                "--summary",
                "x",
            ],
        )
    };
    let a = reply("answer");
    a.code(3);
    assert!(
        a.stderr.contains("takes an `ask-response`, not an `answer`")
            && a.stderr.contains("--to agent:qa --intent ask-response"),
        "{}",
        a.show()
    );
    assert_unchanged(&before, &env.state());
    reply("update").ok();
    let open = |who: &str| env.as_(who, &["questions"]).stdout.contains(&id);
    assert!(open("engineer") && open("qa"), "an update answered the ask");
    assert_eq!(asks(&env)[0]["state"], "open");
    reply("ask-response").ok();
    assert!(!open("engineer") && !open("qa"), "the ask-response did not close it");
    let all = env.circe(["asks", "--all", "--json"]).run();
    assert_eq!(all.json()["asks"][0]["state"], "answered", "{}", all.show());
}

/// `readdress`: a coordinator addresses a waiting task anew (sent to the wrong agent); the
/// new address's agents may claim it. Refused, changing nothing: by another role, to an
/// address where nobody may take its intent, and once the task is held.
#[test]
fn a_coordinator_readdresses_a_task_sent_to_the_wrong_agent() {
    let env = Env::new();
    env.circe(["agent", "add", "dev2", "--role", "engineer"]).run().ok();
    let open = ["send", "--to", "agent:engineer", "--intent", "implement_feature"];
    env.as_("coordinator", &[&open[..], &["--task", "C-4", "--summary", "x"]].concat()).ok();
    let refused = env.as_("dev2", &["claim", "C-4"]);
    refused.code(3);
    assert!(refused.stderr.contains("circe readdress C-4 --to role:ROLE"), "{}", refused.show());
    let before = env.state();
    env.as_("dev2", &["readdress", "C-4", "--to", "role:engineer"]).code(3);
    let o = env.as_("coordinator", &["readdress", "C-4", "--to", "role:qa"]);
    o.code(3);
    assert!(o.stderr.contains("no active agent at role:qa"), "{}", o.show());
    env.as_("coordinator", &["readdress", "C-4", "--to", "role:nope"]).code(5);
    assert_unchanged(&before, &env.state());
    let r = env.as_("coordinator", &["readdress", "C-4", "--to", "role:engineer", "--json"]);
    r.ok();
    assert_eq!(r.json()["to"], "role:engineer");
    let ev = env.as_("coordinator", &["log", "--kind", "readdress", "--json"]);
    assert!(ev.stdout.contains("readdressed by coordinator"), "{}", ev.show());
    env.as_("dev2", &["claim", "C-4"]).ok();
    env.as_("coordinator", &["readdress", "C-4", "--to", "role:engineer"]).code(3);
}

/// Two imports into one root at once: the second is refused while the first holds the
/// import (exit 4, nothing changed); run once the first is done, it skips what the first
/// brought in. (Two imports of one folder side by side used to land every message twice.)
#[test]
fn an_import_while_another_runs_is_refused_and_changes_nothing() {
    local_only!("holds the root's import lock file from outside");
    let env = Env::new();
    let src = env.path().join("tx-msgs");
    write_folder(&src, &FOLDER);
    let lock = env.root().join("locks/import.lock");
    let before = env.state();
    // `flock` holds the lock while its command (the import) runs.
    let held = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sleep", "2"])
        .spawn()
        .expect("flock (util-linux)");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = env.circe(["import", "tx", src.to_str().unwrap(), "--json"]).run();
    // The lock goes with `sleep`, which holds it: waited for, not killed.
    let mut held = held;
    let _ = held.wait();
    assert_eq!(o.code, 4, "{}", o.show());
    assert!(
        o.json()["error"]["message"].as_str().unwrap().contains("another import"),
        "{}",
        o.stdout
    );
    assert_unchanged(&before, &env.state());
    env.circe(["import", "tx", src.to_str().unwrap()]).run().ok();
    let again = env.circe(["import", "tx", src.to_str().unwrap(), "--json"]).run();
    assert_eq!(again.ok().json()["skipped"].as_array().unwrap().len(), FOLDER.len());
}

/// Copies of one broadcast left by two retired agents share msg id and file name: the hint
/// names each by where it lies, and that name (or its path) hands one on; to an agent that
/// holds its own copy of the broadcast, nothing is delivered and the orphan copy is filed.
#[test]
fn one_copy_of_a_broadcast_two_retired_agents_left_is_handed_on() {
    let env = Env::new();
    for a in ["w1", "w2"] {
        env.circe(["agent", "add", a, "--role", "engineer"]).run().ok();
    }
    let sent = env
        .circe(["--json", "send", "--to", "role:engineer", "--intent", "inform", "--summary", "hi"])
        .agent("qa")
        .run();
    let id = sent.ok().json()["msg_id"].as_str().unwrap().to_string();
    for a in ["w1", "w2"] {
        env.as_("coordinator", &["agent", "retire", a]).ok();
    }
    let o = env
        .circe(["--json", "orphans", "redeliver", &id, "--to", "engineer"])
        .agent("coordinator")
        .run();
    o.code(2);
    let hint = o.json()["error"]["hint"].as_str().unwrap().to_string();
    let one = hint.rsplit(": ").next().unwrap().split(", ").next().unwrap().to_string();
    assert!(one.starts_with("inbox:w1/"), "{hint}");
    let file = one.trim_start_matches("inbox:w1/").to_string();
    let moved = env
        .circe(["--json", "orphans", "redeliver", &one, "--to", "engineer"])
        .agent("coordinator")
        .run();
    let j = moved.ok().json();
    assert_eq!(
        (&j["box"], &j["already"]),
        (&"logs".into(), &true.into()),
        "engineer held its own copy: {j}"
    );
    assert_eq!(env.ls("AGENTS/engineer/INBOX").len(), 1, "engineer keeps its one copy");
    let path = format!("AGENTS/w2/INBOX/{file}");
    env.circe(["orphans", "redeliver", &path, "--to", "engineer-3"])
        .agent("coordinator")
        .run()
        .code(5);
    env.circe(["agent", "add", "engineer-3", "--role", "engineer"]).run().ok();
    let by_path = env
        .circe(["--json", "orphans", "redeliver", &path, "--to", "engineer-3"])
        .agent("coordinator")
        .run();
    assert_eq!(by_path.ok().json()["file"], file.as_str());
    env.circe(["doctor"]).run().ok();
}

/// `validate` takes what `send --file` takes: every reference example is valid, a TX `task`
/// without `task-id` (its msg-id is its task) and a reply without one (the task of what it
/// answers) too; a `task` whose msg-id cannot be a task id is not.
#[test]
fn validate_takes_the_reference_examples_send_takes() {
    let env = tx_root();
    let all = [
        ASK,
        ASK_RESPONSE,
        TASK,
        TASK_COMPLETE,
        UPDATE,
        PROMPT,
        EX1_ASK,
        EX1_RESPONSE,
        EX2_TASK,
        EX2_COMPLETE,
        EX3_UPDATE,
    ];
    for (n, text) in all.iter().enumerate() {
        let f = env.path().join(format!("example-{n}.md"));
        std::fs::write(&f, text).unwrap();
        let f = f.display().to_string();
        // The six type templates are whole messages; the usage examples lack a timestamp,
        // which a stored message has.
        let stored = if n < 6 { &["validate", &f][..] } else { &["validate", "--draft", &f][..] };
        for args in [&["validate", "--draft", &f][..], stored] {
            let o = env.circe(args).run();
            assert_eq!(o.code, 0, "example {n}: {}", o.show());
        }
    }
    let bad = env.path().join("bad-task.md");
    std::fs::write(&bad, TASK.replace("msg-id: task-review-001", "msg-id: task.review.001"))
        .unwrap();
    let o = env.circe(["validate", "--draft", &bad.display().to_string()]).run();
    o.code(3);
    assert!(o.stderr.contains("is not one"), "{}", o.show());
}

/// A TX draft `send --file` takes, checked as a stored message, lacks what `send` fills in:
/// the hint says to check it as a draft, not to add the lines, and as a draft it passes.
#[test]
fn validate_points_a_tx_draft_at_draft() {
    let env = tx_root();
    let f = env.path().join("ask.md");
    std::fs::write(&f, "---\nto: brain\ntype: ask\nmsg-id: ask-001\n---\nWhich store?\n").unwrap();
    let f = f.display().to_string();
    let o = env.circe(["validate", &f]).run();
    o.code(3);
    assert!(o.stderr.contains("missing required header"), "{}", o.show());
    let hint = format!("check it with `circe validate --draft {f}`");
    assert!(o.stderr.contains(&hint), "{}", o.show());
    assert!(!o.stderr.contains("add a `from:` line"), "{}", o.show());
    env.circe(["validate", "--draft", &f]).run().ok();
    // One that does not read as a draft either keeps the hints that fix it.
    std::fs::write(&f, "---\ntype: ask\nmsg-id: ask-001\n---\nWhich store?\n").unwrap();
    let o = env.circe(["validate", &f]).run();
    o.code(3);
    assert!(!o.stderr.contains("--draft"), "{}", o.show());
    send(&env, "core", "---\nto: brain\ntype: ask\nmsg-id: ask-001\n---\nWhich store?\n").ok();
}

/// `export tx` writes circe's own messages with TX addresses: an agent as `MESH/NAME` (the
/// root's mesh name), in the front matter and in the file name (its agent part); a role
/// stays `role:NAME` in the front matter (TX has no roles) and `role-NAME` in the name: no
/// `:` in any file name.
#[test]
fn export_tx_writes_agents_as_mesh_and_name() {
    let env = Env::new();
    let cfg = env.read("circe.yaml");
    env.set_config(&format!("{cfg}tx:\n  mesh: team\n"));
    let task = ["send", "--to", "role:engineer", "--intent", "task", "--summary", "do it"];
    env.as_("coordinator", &task).ok();
    let ask =
        ["send", "--json", "--to", "agent:coordinator", "--intent", "ask", "--summary", "which?"];
    let asked = env.as_("engineer", &ask);
    let id = asked.ok().json()["msg_id"].as_str().unwrap().to_string();
    // A report (an ask-response, a task-complete) is `complete` in TX, as reference 000's are.
    let answer = ["send", "--intent", "ask-response", "--in-reply-to", &id, "--summary", "this"];
    env.as_("coordinator", &answer).ok();
    let out = env.path().join("exported");
    env.circe(["export", "tx", out.to_str().unwrap()]).run().ok();
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    let response = names.iter().find(|n| n.contains("-ask-response-")).unwrap();
    let text = std::fs::read_to_string(out.join(response)).unwrap();
    assert!(text.contains("\nstatus: complete\n"), "{text}");
    assert!(names.iter().all(|n| !n.contains(':')), "{names:?}");
    let ask_file = names.iter().find(|n| n.contains("-ask-engineer")).unwrap();
    assert!(ask_file.contains("-ask-engineer--coordinator-"), "{ask_file}");
    let text = std::fs::read_to_string(out.join(ask_file)).unwrap();
    assert!(
        text.contains("to: team/coordinator\n") && text.contains("from: team/engineer\n"),
        "{text}"
    );
    let task_file = names.iter().find(|n| n.contains("-task-")).unwrap();
    assert!(task_file.contains("-task-coordinator--role-engineer-"), "{task_file}");
    let text = std::fs::read_to_string(out.join(task_file)).unwrap();
    assert!(
        text.contains("to: role:engineer\n") && text.contains("from: team/coordinator\n"),
        "{text}"
    );
}

/// circe's own tasks go out through `export tx` and come back through `import tx` as they
/// stood: a waiting task waits again (its message opens it, whatever its intent, with the
/// intent's checks), handed on it waits for whom it was handed to (its earlier message is
/// history), and a completed or held one is history, its status said in the exported file.
#[test]
fn circe_tasks_come_back_from_an_export_as_they_stood() {
    let env = Env::new();
    env.open_task("T-OPEN");
    env.complete_task("T-DONE");
    env.open_task("T-HELD");
    env.as_("engineer", &["claim", "T-HELD"]).ok();
    env.open_task("T-ON");
    env.as_("engineer", &["claim", "T-ON"]).ok();
    let on = ["send", "--to", "role:qa", "--intent", "test", "--task", "T-ON", "--summary", "try"];
    env.as_("engineer", &on).ok();
    // Past its deadline (`expired`: a status no header has) it goes out as `failed`.
    let late = ["send", "--to", "role:engineer", "--intent", "implement_feature", "--task"];
    env.as_(
        "coordinator",
        &[&late[..], &["T-LATE", "--summary", "l", "--deadline", "10m"]].concat(),
    )
    .ok();
    // (the others' leases, 30 minutes, still run)
    env.circe(["reap"]).now("2025-11-21T17:15:00Z").run().ok();
    assert_eq!(env.record("T-LATE").status.as_str(), "expired");
    let out = env.path().join("exported");
    env.circe(["export", "tx", out.to_str().unwrap()]).run().ok();
    let status_of = |task: &str| {
        let text = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            // The task's own message, not circe's notices about it.
            .find(|t| t.contains(&format!("\ntask-id: {task}\n")) && !t.contains("status_update"))
            .unwrap();
        text.lines().find_map(|l| l.strip_prefix("status: ")).unwrap().to_string()
    };
    assert_eq!(status_of("T-OPEN"), "start");
    assert_eq!(status_of("T-DONE"), "complete");
    assert_eq!(status_of("T-HELD"), "claimed");
    assert_eq!(status_of("T-LATE"), "failed");
    let fresh = Env::new();
    let o = fresh.circe(["import", "tx", out.to_str().unwrap(), "--json"]).run();
    o.ok();
    let r = o.json();
    assert_eq!(
        (r["open_tasks"].as_u64(), r["history"].as_u64()),
        // (T-LATE's message and circe's notice of its deadline among the history)
        (Some(2), Some(5)),
        "{}",
        o.show()
    );
    assert!(r["skipped"].as_array().unwrap().is_empty(), "{}", o.show());
    let tasks = fresh.circe(["tasks", "--json"]).run();
    let list = tasks.json();
    let ids: Vec<&str> =
        list["tasks"].as_array().unwrap().iter().map(|t| t["task_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["T-ON", "T-OPEN"], "{}", tasks.show());
    let open = fresh.record("T-OPEN");
    assert_eq!((open.status.as_str(), open.intent.as_str()), ("new", "implement_feature"));
    let on = fresh.record("T-ON");
    assert_eq!((on.intent.as_str(), on.to.as_str()), ("test", "role:qa"));
    assert!(fresh.read("TASKS/T-OPEN.checks").contains("tests_passed"), "the intent's checks");
    // Named as `send` names them: an address's name, no `role:` (no `:` in a file name).
    let waiting = fresh.ls("NEW_MESSAGES");
    assert!(waiting.iter().all(|n| !n.contains(':')), "{waiting:?}");
    fresh.circe(["doctor"]).run().ok();
}

/// An ask or a task imported past its deadline is history ("Expired messages logged but not
/// processed"): filed into LOGS, no open ask, no waiting task; one still before its deadline
/// is live.
#[test]
fn an_import_past_its_deadline_is_history() {
    let env = tx_root();
    let src = env.path().join("tx-late");
    let ask = "---\ntype: ask\nstatus: start\nmsg-id: late-ask\nheadline: q\ndeadline: 2025-11-03T00:00:00Z\n---\n\nq\n";
    let task = "---\ntype: task\nstatus: start\nmsg-id: late-task\nheadline: t\ndeadline: 2025-11-03T00:00:00Z\n---\n\nt\n";
    let live = "---\ntype: task\nstatus: start\nmsg-id: live-task\nheadline: t\ndeadline: 2030-01-01T00:00:00Z\n---\n\nt\n";
    write_folder(
        &src,
        &[
            ("1102100000-ask-core--brain-late-ask.md", ask),
            ("1102100001-task-core--brain-late-task.md", task),
            ("1102100002-task-core--brain-live-task.md", live),
            // TX's orphan (its mesh was gone): never delivered, history.
            (
                "1102100003-task-core>brain-orphan-task-orphan.md",
                &live.replace("live-task", "orphan-task"),
            ),
        ],
    );
    let o = env.circe(["import", "tx", src.to_str().unwrap(), "--json"]).run();
    o.ok();
    let j = o.json();
    assert_eq!(
        (j["history"].as_u64(), j["open_asks"].as_u64(), j["open_tasks"].as_u64()),
        (Some(3), Some(0), Some(1)),
        "{}",
        o.show()
    );
    assert!(asks(&env).is_empty(), "{:?}", asks(&env));
    let tasks = env.circe(["tasks", "--json"]).run();
    let list = tasks.json();
    let ids: Vec<&str> =
        list["tasks"].as_array().unwrap().iter().map(|t| t["task_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["live-task"], "{}", tasks.show());
}

/// A TX file name holds no year: a file of 31 December imported on 1 January is last
/// year's, not eleven months ahead.
#[test]
fn a_file_of_new_years_eve_imported_on_new_years_day_is_last_years() {
    let env = tx_root();
    let src = env.path().join("tx-msgs");
    let update = "---\nto: core/core\nfrom: brain/brain\ntype: update\nstatus: complete\nmsg-id: eve-1\nheadline: late\n---\n\nLate news.\n";
    write_folder(&src, &[("1231235900-update-brain--core-eve-1.md", update)]);
    let o = env.circe(["import", "tx", src.to_str().unwrap()]).now("2026-01-01T00:10:00Z").run();
    o.ok();
    let shown = env.circe(["show", "eve-1", "--json"]).run();
    shown.ok();
    assert_eq!(shown.json()["message"]["created_at"], "2025-12-31T23:59:00Z", "{}", shown.show());
}

/// `export tx` writes no `:` in a file name, with or without a mesh name (a database root
/// has none without `tx: mesh:`): an agent's address is its name there.
#[test]
fn exported_names_hold_no_colon() {
    let env = Env::new();
    let send = ["send", "--to", "agent:engineer", "--intent", "fix_bug", "--task", "T-1"];
    env.as_("coordinator", &[&send[..], &["--summary", "bug"]].concat()).ok();
    env.as_("coordinator", &["send", "--to", "role:qa", "--intent", "inform", "--summary", "x"])
        .ok();
    let out = env.path().join("tx-out");
    env.circe(["export", "tx", out.to_str().unwrap()]).run().ok();
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 2, "{names:?}");
    assert!(names.iter().all(|n| !n.contains(':')), "{names:?}");
    assert!(names.iter().any(|n| n.contains("--engineer-")), "{names:?}");
}

/// A TX message of a type this root's registry does not know is not imported (it would be a
/// message no command understands): named with the closest intent and the way in, and left
/// in the folder. A folder none of whose files could be brought in is exit 3; one imported
/// before, run again, is not.
#[test]
fn an_unknown_type_is_left_out_and_a_folder_of_nothing_importable_is_exit_3() {
    let env = Env::new();
    let src = env.path().join("tx-unknown");
    write_folder(
        &src,
        &[
            (
                "1102110000-updte-core--brain-u1.md",
                "---\nfrom: core\nto: brain\ntype: updte\nmsg-id: u1\n---\n?\n",
            ),
            ("notes.md", "hello\n"),
        ],
    );
    let before = env.state();
    let o = env.circe(["import", "tx", src.to_str().unwrap(), "--json"]).run();
    o.code(3);
    assert_unchanged(&before, &env.state());
    let reasons: Vec<String> = o.json()["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reason"].as_str().unwrap().to_string())
        .collect();
    assert!(reasons.iter().any(|r| r.contains("did you mean `update`?")), "{}", o.show());
    assert!(reasons.iter().any(|r| r.contains("registry: intents:")), "{}", o.show());
    // Fixed, it comes in; run again, nothing new is no failure.
    std::fs::write(
        src.join("1102110000-updte-core--brain-u1.md"),
        "---\nfrom: core\nto: brain\ntype: update\nmsg-id: u1\n---\n?\n",
    )
    .unwrap();
    env.circe(["import", "tx", src.to_str().unwrap()]).run().ok();
    env.circe(["import", "tx", src.to_str().unwrap()]).run().ok();
}
