//! The bridge's pure parts: every example of reference 000 is read and given back byte for
//! byte; what TX leaves out is filled in and cut again.

use super::*;

const EXAMPLES: [(&str, &str); 11] = [
    ("1030100000-ask-core--brain-ask-brain-001.md", include_str!("../message/testdata/tx_ask.md")),
    (
        "1030100500-ask-response-brain--core-response-ask-brain-001.md",
        include_str!("../message/testdata/tx_ask_response.md"),
    ),
    (
        "1030100000-task-core--coordinator-task-review-001.md",
        include_str!("../message/testdata/tx_task.md"),
    ),
    (
        "1030120000-task-complete-coordinator--core-complete-review-001.md",
        include_str!("../message/testdata/tx_task_complete.md"),
    ),
    (
        "1030110000-update-brain--core-update-spec-graph-001.md",
        include_str!("../message/testdata/tx_update.md"),
    ),
    (
        "1103080000-prompt-system--interviewer-prompt-1730628000.md",
        include_str!("../message/testdata/tx_prompt.md"),
    ),
    ("1102083000-ask-core--brain-ask-001.md", include_str!("../message/testdata/tx_ex1_ask.md")),
    (
        "1102084512-ask-response-brain--core-response-001.md",
        include_str!("../message/testdata/tx_ex1_response.md"),
    ),
    (
        "1102083000-task-core--coordinator-task-001.md",
        include_str!("../message/testdata/tx_ex2_task.md"),
    ),
    (
        "1102091530-task-complete-coordinator--core-complete-001.md",
        include_str!("../message/testdata/tx_ex2_complete.md"),
    ),
    (
        "1102093000-update-brain--core-update-001.md",
        include_str!("../message/testdata/tx_ex3_update.md"),
    ),
];

fn now() -> DateTime<Utc> {
    crate::clock::parse("2025-11-21T17:00:00Z").unwrap()
}

fn tasks(id: &str) -> Option<String> {
    ["task-review-001", "task-001"].contains(&id).then(|| id.to_string())
}

#[test]
fn every_reference_example_imports_and_exports_byte_for_byte() {
    for (name, text) in EXAMPLES {
        let got = import_file(name, text.as_bytes(), now(), &tasks)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let stored = std::str::from_utf8(&got.content).unwrap();
        assert!(stored.contains("circe-import: \""), "{name}: {stored}");
        let (back_name, back) = original(&got.content).unwrap();
        assert_eq!(back_name, name);
        assert_eq!(back, text.as_bytes(), "{name}: byte for byte");
        assert!(got.message.msg_id.is_some() && got.message.created_at.is_some(), "{name}");
    }
}

#[test]
fn what_tx_leaves_out_is_filled_in() {
    let (name, text) = EXAMPLES[8]; // the minimal task: no timestamp, no task-id
    let got = import_file(name, text.as_bytes(), now(), &tasks).unwrap();
    assert_eq!(got.filled, ["task-id", "timestamp"]);
    assert_eq!(got.message.task_id.as_deref(), Some("task-001"));
    assert_eq!(crate::clock::format(got.message.created_at.unwrap()), "2025-11-02T08:30:00Z");
    let (name, text) = EXAMPLES[9]; // its completion inherits the task id
    let got = import_file(name, text.as_bytes(), now(), &tasks).unwrap();
    assert_eq!(got.message.task_id.as_deref(), Some("task-001"));
    // TX's own files: `status: pending`, a bare `to`, a reply with no status or timestamp,
    // no trailing newline.
    let tx_own = "---\nto: brain\nfrom: core/core\ntype: ask-response\nmsg-id: r-9\nin-reply-to: a-1\n---\n\nfine";
    let got =
        import_file("1102083000-ask-response-core--brain-r-9.md", tx_own.as_bytes(), now(), &tasks)
            .unwrap();
    assert_eq!(got.filled, ["status", "timestamp"]);
    assert_eq!(got.message.status.as_deref(), Some("complete"));
    assert_eq!(original(&got.content).unwrap().1, tx_own.as_bytes());
    let pending = "---\nto: brain\nfrom: core\ntype: task\nstatus: pending\nmsg-id: t-2\n---\nx\n";
    let got = import_file("1102083000-task-core--brain-t-2.md", pending.as_bytes(), now(), &tasks);
    assert_eq!(got.unwrap().message.status.as_deref(), Some("pending"));
}

#[test]
fn the_name_fills_what_the_front_matter_lacks_and_the_front_matter_wins() {
    let no_type = "---\nfrom: brain\nmsg-id: u-7\n---\nbody\n";
    let got =
        import_file("1102083000-update-brain--core-u-7.md", no_type.as_bytes(), now(), &tasks)
            .unwrap();
    assert_eq!(got.message.intent.as_deref(), Some("update"));
    assert_eq!(got.message.to.as_deref(), Some("core"));
    let lies = "---\nto: qa\nfrom: brain\ntype: update\nmsg-id: u-8\n---\n";
    let got =
        import_file("1102083000-task-complete-x--y-z.md", lies.as_bytes(), now(), &tasks).unwrap();
    assert_eq!(
        (got.message.intent.as_deref(), got.message.to.as_deref()),
        (Some("update"), Some("qa"))
    );
}

#[test]
fn unreadable_files_say_why() {
    for (name, text, says) in [
        ("a.md", "# MESSAGE\nfrom: a\n", "not a TX message"),
        ("a.md", "---\nto: [x\n---\n", "YAML"),
        ("a.md", "---\nfrom: a\n---\n", "missing required header"),
        (
            "1102083000-task-a--b-bad.id.md",
            "---\nto: b\nfrom: a\ntype: task\nmsg-id: bad.id\n---\n",
            "not one",
        ),
        ("a.md", "---\nto: b\nfrom: a\ntype: ask\n---\n", "no msg-id"),
    ] {
        let e = import_file(name, text.as_bytes(), now(), &tasks).unwrap_err();
        assert!(e.contains(says), "{name}: {e}");
    }
    assert!(import_file("a.md", &[0xff, 0xfe], now(), &tasks).unwrap_err().contains("UTF-8"));
    assert_eq!(original(b"---\nto: x\n---\n"), None, "not imported: nothing to give back");
    // A mark any agent wrote, naming no plain file name: exported as circe's own.
    for bad in ["../../escaped.md", "/etc/x.md", ".hidden.md", "", "a\u{0}b.md", "a\\b.md"] {
        let text = format!("---\nto: x\n{MARK}: {}\n---\n", serde_json::to_string(bad).unwrap());
        assert_eq!(original(text.as_bytes()), None, "{bad:?}");
    }
    let good = format!("---\nto: x\n{MARK}: \"2025-01-01-a.md\"\n---\n");
    assert_eq!(
        original(good.as_bytes()).unwrap().0,
        "2025-01-01-a.md",
        "the checker passes a plain name"
    );
}

/// TX's one task type.
fn is_task(intent: &str) -> bool {
    intent == "task"
}

#[test]
fn landings_follow_the_thread() {
    let msgs: Vec<Message> = EXAMPLES
        .iter()
        .map(|(n, t)| import_file(n, t.as_bytes(), now(), &tasks).unwrap().message)
        .collect();
    let refs: Vec<&Message> = msgs.iter().collect();
    let got = landings(&refs, &is_task);
    // Every ask and task of the reference is answered or completed: all history.
    assert!(got.iter().all(|l| *l == Landing::History), "{got:?}");
    let got = landings(&refs[..1], &is_task);
    assert_eq!(got, [Landing::OpenAsk], "an ask alone is open");
    assert_eq!(landings(&[&msgs[8]], &is_task), [Landing::OpenTask]);
    // A task-complete that names its task by `task-id` alone completes it too.
    let done =
        "---\nfrom: b\nto: a\ntype: task-complete\nmsg-id: done-9\ntask-id: T-9\n---\ndone\n";
    let task = "---\nfrom: a\nto: b\ntype: task\nmsg-id: T-9\n---\ndo it\n";
    let t = import_file("20251121_170000_a-b_task.md", task.as_bytes(), now(), &tasks).unwrap();
    let d = import_file("20251121_170100_b-a_done.md", done.as_bytes(), now(), &tasks).unwrap();
    assert_eq!(landings(&[&t.message], &is_task), [Landing::OpenTask]);
    assert_eq!(landings(&[&t.message, &d.message], &is_task), [Landing::History, Landing::History]);
    // A task handed on: its last task message is the one that waits.
    let on = "---\nfrom: b\nto: c\ntype: task\nmsg-id: on-9\ntask-id: T-9\n---\ntry it\n";
    let o = import_file("20251121_170100_b-c_task.md", on.as_bytes(), now(), &tasks).unwrap();
    assert_eq!(
        landings(&[&t.message, &o.message], &is_task),
        [Landing::History, Landing::OpenTask]
    );
    // A CIRCE intent that opens a task opens one as TX's `task` does.
    let feature = t.message.clone();
    let feature = Message { intent: Some("implement_feature".into()), ..feature };
    assert_eq!(landings(&[&feature], &|i| i == "implement_feature"), [Landing::OpenTask]);
    assert_eq!(landings(&[&feature], &is_task), [Landing::History]);
}
