//! What an agent told only by `prime`, `--help` and the hints needs: each hint, followed as
//! printed, leads somewhere good, never to acting as another agent; a reply goes back to
//! whoever asked; the work loop reports a result the way the task asks for it.

use crate::common::{Env, assert_unchanged};

/// `circe --agent AGENT send ARGS --json`, its msg_id.
/// What circe's notices in `who`'s INBOX answer (their `in_reply_to`), oldest first.
fn circe_notices(env: &Env, who: &str) -> Vec<String> {
    let inbox = env.as_(who, &["inbox", "--json"]);
    inbox.json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from"] == "circe")
        .map(|m| m["in_reply_to"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn sent(env: &Env, agent: &str, args: &[&str]) -> String {
    let mut all = vec!["send", "--json"];
    all.extend_from_slice(args);
    let o = env.as_(agent, &all);
    o.ok();
    o.json()["msg_id"].as_str().unwrap().to_string()
}

/// prime's "answer with send --intent answer --in-reply-to MSG_ID", as printed: the answer
/// goes to the asker; one addressed elsewhere is refused (the question would count as
/// answered while the asker never saw it); what a reply names must be a message.
#[test]
fn a_reply_goes_back_to_whoever_asked() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let q =
        sent(&env, "engineer", &["--to", "role:qa", "--intent", "question", "--summary", "db?"]);
    let qs = env.as_("qa", &["questions"]);
    let hint =
        format!("send --intent answer --in-reply-to {q} --summary \"...\" (it goes to the asker)");
    assert!(qs.stdout.contains(&hint), "{}", qs.show());
    let before = env.state();
    for to in ["agent:engineer-2", "role:scribe"] {
        let o = env.as_(
            "qa",
            &["send", "--to", to, "--intent", "answer", "--in-reply-to", &q, "--summary", "pg"],
        );
        o.code(3);
        assert!(
            o.stderr.contains("was asked by engineer: engineer would never see it"),
            "{}",
            o.show()
        );
        assert!(
            o.stderr.contains("address it to agent:engineer, or leave --to out"),
            "{}",
            o.show()
        );
    }
    assert_unchanged(&before, &env.state());
    // The role the asker belongs to reaches it: that is fine.
    let q2 =
        sent(&env, "engineer", &["--to", "role:qa", "--intent", "question", "--summary", "os?"]);
    env.as_(
        "qa",
        &[
            "send",
            "--to",
            "role:engineer",
            "--intent",
            "answer",
            "--in-reply-to",
            &q2,
            "--summary",
            "linux",
        ],
    )
    .ok();
    // Without --to: to the asker alone.
    let o = env.as_(
        "qa",
        &["send", "--json", "--intent", "answer", "--in-reply-to", &q, "--summary", "pg"],
    );
    o.ok();
    assert_eq!(o.json()["delivered"][0]["box"], "inbox:engineer", "{}", o.show());
    assert_eq!(o.json()["delivered"].as_array().unwrap().len(), 1, "{}", o.show());
    assert!(env.ls("AGENTS/engineer-2/INBOX").len() == 1, "engineer-2 got only the role's answer");
    let none = env.as_("engineer", &["questions"]);
    assert!(none.ok().stdout.contains("no open questions"), "{}", none.show());
    // Any intent: what it answers must be a message (a file name is answered with the id).
    let before = env.state();
    for intent in ["inform", "question", "update", "request_help"] {
        let o = env.as_(
            "qa",
            &[
                "send",
                "--to",
                "role:engineer",
                "--intent",
                intent,
                "--in-reply-to",
                "no-such-message",
                "--summary",
                "x",
            ],
        );
        o.code(5);
        assert!(o.stderr.contains("no message has that id"), "{}", o.show());
    }
    assert_unchanged(&before, &env.state());
    // Neither --to nor --in-reply-to: the usage error says what --to takes.
    let o = env.as_("qa", &["send", "--intent", "inform", "--summary", "x"]);
    o.code(2);
    assert!(o.stderr.contains("agent:NAME, role:NAME or all"), "{}", o.show());
}

/// Hints never say to act as another agent: a refused coordinator's task says to ask one,
/// and a `from:` line naming another agent says to remove it.
#[test]
fn no_hint_says_to_act_as_another_agent() {
    let env = Env::new();
    env.open_task("T-1");
    for args in [&["readdress", "T-1", "--to", "role:qa"][..], &["agent", "retire", "qa"][..]] {
        let o = env.as_("engineer", args);
        o.code(3);
        assert!(
            !o.stderr.contains("--agent coordinator") && !o.stderr.contains("act as"),
            "{}",
            o.show()
        );
        assert!(o.stderr.contains("ask a coordinator to: `circe --agent engineer send --to role:coordinator --intent request_help"), "{}", o.show());
    }
    let f = env.path().join("m.md");
    std::fs::write(&f, "# MESSAGE\nfrom: coordinator\nto: role:engineer\nintent: implement_feature\ntask_id: F-9\n\n## Summary\nx\n").unwrap();
    let o = env.as_("engineer", &["send", "--file", f.to_str().unwrap()]);
    o.code(3);
    assert!(!o.stderr.contains("--agent"), "{}", o.show());
    assert!(o.stderr.contains("remove the from: line"), "{}", o.show());
}

/// qa's and eagle's work loops report the result the tasks they take ask for (to the
/// coordinator), never hand their task on as a scribe's; an engineer hands on to qa first.
#[test]
fn the_work_loop_reports_a_result_the_way_the_task_asks() {
    let env = Env::new();
    let steps = |agent: &str| {
        let o = env.as_(agent, &["prime", "--json"]);
        o.json()["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let qa = steps("qa");
    assert!(
        qa.iter()
            .any(|s| s.contains("send --to role:coordinator --intent test_results --task TASK")),
        "{qa:#?}"
    );
    assert!(!qa.iter().any(|s| s.contains("--intent document")), "{qa:#?}");
    let eagle = steps("eagle");
    assert!(eagle.iter().any(|s| s.contains("--intent audit_report --task TASK")), "{eagle:#?}");
    assert!(!eagle.iter().any(|s| s.contains("--intent document")), "{eagle:#?}");
    let eng = steps("engineer");
    let hand_on = eng.iter().position(|s| s.contains("--to role:qa --intent test --task TASK"));
    let report = eng.iter().position(|s| s.contains("--intent status_update --task TASK"));
    assert!(hand_on.is_some() && report.is_some() && hand_on < report, "{eng:#?}");
}

/// A check's hints say to run what proves it, never to assert it; a command given without
/// `--` is said so.
#[test]
fn check_hints_say_to_run_and_where_the_command_goes() {
    let env = Env::new();
    env.open_task("C-1");
    env.as_("engineer", &["claim", "C-1"]).ok();
    let o = env.as_("engineer", &["check", "C-1", "tests_passed"]);
    o.code(2);
    let hint = o.stderr.lines().find(|l| l.starts_with("hint: ")).unwrap_or_default();
    assert!(
        hint.contains("--run tests_passed -- <command that proves it>") && !hint.contains("=true"),
        "{}",
        o.show()
    );
    for args in [
        &["check", "C-1", "--run", "tests_passed", "cargo", "test"][..],
        &["check", "C-1", "--run", "tests_passed", "true"][..],
    ] {
        let o = env.as_("engineer", args);
        o.code(2);
        assert!(
            o.stderr.contains("goes after `--`: circe check TASK --run NAME -- COMMAND"),
            "{}",
            o.show()
        );
    }
    assert_eq!(env.record("C-1").status.as_str(), "claimed");
}

/// `validate --draft` refuses a template copied and not filled in, as `send --file` does,
/// with the same words: its placeholder task id, and every placeholder line left in its
/// body (`send` names the first and counts the rest).
#[test]
fn validate_draft_refuses_an_unfilled_template_as_send_does() {
    let env = Env::new();
    let t = env.circe(["send", "--template", "implement_feature"]).agent("coordinator").run();
    t.ok();
    let draft = env.path().join("d.md");
    let d = draft.to_str().unwrap();
    for text in [t.stdout.clone(), t.stdout.replace("TASK-001", "BUG-7")] {
        std::fs::write(&draft, &text).unwrap();
        let sent = env.as_("coordinator", &["send", "--file", d]);
        sent.code(3);
        let checked = env.circe(["validate", "--draft", d]).run();
        checked.code(3);
        let said = sent.stderr.lines().next().unwrap();
        let said = said.trim_start_matches("error: ").trim_end_matches(": nothing was sent");
        let said = said.split(" (and ").next().unwrap();
        assert!(checked.stderr.contains(said), "{}\n{}", sent.show(), checked.show());
        assert!(sent.stderr.contains("more: `circe validate --draft"), "{}", sent.show());
    }
    let json = env.circe(["validate", "--draft", "--json", d]).run();
    json.code(3);
    let lines: Vec<_> = json.json()["files"][0]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["line_number"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [9, 12, 16, 19], "{}", json.show());
    // Its address too: a role that may not receive the intent, an agent that is none, and
    // with --agent a sender whose role may not send it; each named at its header line.
    let filled =
        "# MESSAGE\nto: role:qa\nintent: implement_feature\ntask_id: A-1\n\n## Summary\nx\n";
    for (text, agent, field, says) in [
        (filled.to_string(), None, "to", "reaches role `qa`, which may not receive"),
        (filled.replace("role:qa", "agent:bob"), None, "to", "no agent `bob`"),
        (filled.replace("role:qa", "role:engineer"), Some("qa"), "intent", "may not send"),
    ] {
        std::fs::write(&draft, &text).unwrap();
        let mut run = env.circe(["validate", "--draft", "--json", d]);
        if let Some(a) = agent {
            run = run.agent(a);
        }
        let o = run.run();
        o.code(3);
        let p = &o.json()["files"][0]["problems"][0];
        assert_eq!(p["field"], field, "{}", o.show());
        assert!(p["message"].as_str().unwrap_or_default().contains(says), "{}", o.show());
    }
    std::fs::write(&draft, filled.replace("role:qa", "role:engineer")).unwrap();
    env.circe(["validate", "--draft", d]).agent("coordinator").run().ok();
}

/// `send --help`'s example (`send --template test > draft.md`, `send --file draft.md`) sent
/// as printed, not filled in, opens no task: the first placeholder left is named by line.
#[test]
fn a_template_sent_unfilled_opens_no_task() {
    let env = Env::new();
    let t = env.circe(["send", "--template", "test"]).run();
    t.ok();
    let draft = env.path().join("draft.md");
    std::fs::write(&draft, &t.stdout).unwrap();
    let before = env.state();
    let o = env.as_("engineer", &["send", "--file", draft.to_str().unwrap()]);
    o.code(3);
    assert!(o.stderr.contains("`task_id: TASK-001` is the template's placeholder"), "{}", o.show());
    std::fs::write(&draft, t.stdout.replace("TASK-001", "LOGIN-1")).unwrap();
    let o = env.as_("engineer", &["send", "--file", draft.to_str().unwrap()]);
    o.code(3);
    assert!(
        o.stderr.contains("line 9: `<one line: what to test>` is still the template's placeholder"),
        "{}",
        o.show()
    );
    assert_unchanged(&before, &env.state());
    let filled: String = t
        .stdout
        .lines()
        .map(|l| if l.trim_start_matches("- ").starts_with('<') { "filled in" } else { l })
        .map(|l| format!("{}\n", l.replace("TASK-001", "LOGIN-1")))
        .collect();
    std::fs::write(&draft, filled).unwrap();
    env.as_("engineer", &["send", "--file", draft.to_str().unwrap()]).ok();
    assert_eq!(env.record("LOGIN-1").status.as_str(), "new");
}

/// A task meant for one agent, held past its lease: another agent's claim is refused with the
/// way on a coordinator takes (release it, then address it anew), each step run as printed.
#[test]
fn the_way_on_for_a_lapsed_task_meant_for_one_agent_runs_as_printed() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let open = [
        "send",
        "--to",
        "agent:engineer",
        "--intent",
        "implement_feature",
        "--task",
        "REF-3",
        "--summary",
        "x",
    ];
    env.as_("coordinator", &open).ok();
    env.at("2025-11-21T17:00:00Z", "engineer", &["claim", "REF-3"]).ok();
    // Held, its lease running: not one engineer-2 may take at all (exit 3), not "wait".
    let o = env.at("2025-11-21T17:01:00Z", "engineer-2", &["claim", "REF-3"]);
    o.code(3);
    assert!(o.stderr.contains("may not take task REF-3"), "{}", o.show());
    let late = "2025-11-21T18:00:00Z";
    let o = env.at(late, "engineer-2", &["claim", "REF-3"]);
    o.code(3);
    assert!(
        o.stderr.contains("`circe release --force REF-3`")
            && o.stderr.contains("then address it anew"),
        "{}",
        o.show()
    );
    // Readdressed while held: refused, with the release that comes first.
    let o = env.at(late, "coordinator", &["readdress", "REF-3", "--to", "agent:engineer-2"]);
    o.code(3);
    let first = "put it back in the queue first (`circe --agent coordinator release --force REF-3";
    assert!(o.stderr.contains(first), "{}", o.show());
    env.at(late, "coordinator", &["release", "--force", "REF-3", "--reason", "engineer is gone"])
        .ok();
    // A blank reason is refused, as `release` refuses one: the log keeps it as the why.
    let blank = ["readdress", "REF-3", "--to", "agent:engineer-2", "--reason", "  "];
    env.at(late, "coordinator", &blank).code(3);
    let to = ["--json", "readdress", "REF-3", "--to", "agent:engineer-2"];
    assert_eq!(env.at(late, "coordinator", &to).ok().json()["already"], false);
    // Again to the address it has: nothing changes, and no event says it did.
    let events = env.events().len();
    let again = env.at(late, "coordinator", &to);
    assert_eq!(again.ok().json()["already"], true, "{}", again.show());
    assert_eq!(env.events().len(), events);
    env.at(late, "engineer-2", &["claim", "REF-3"]).ok();
}

/// `take` run again moves nothing and says so (exit 0), by task id and by file name, as
/// `done` run again does; another agent's take of it is still not found.
#[test]
fn take_run_again_is_already_done() {
    let env = Env::new();
    env.open_task("T-1");
    env.as_("engineer", &["claim", "T-1"]).ok();
    env.as_("engineer", &["take", "T-1"]).ok();
    let again = env.as_("engineer", &["take", "T-1", "--json"]);
    assert_eq!(again.ok().json()["already"], true, "{}", again.show());
    let file = again.json()["file"].as_str().unwrap().to_string();
    let o = env.as_("engineer", &["take", &file]);
    assert!(o.ok().stdout.contains("already: nothing to take"), "{}", o.show());
    env.as_("qa", &["take", &file]).code(5);
}

/// A blocked task whose lease ran out goes back to the queue with its note, and the next
/// claimer is told it (the claim clears it), in text and JSON, on a look first too.
#[test]
fn the_next_claimer_is_told_the_note_a_task_was_left_with() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.open_task("BL-1");
    let t0 = "2025-11-21T17:00:00Z";
    env.at(t0, "engineer", &["claim", "BL-1"]).ok();
    env.at(t0, "engineer", &["status", "BL-1", "in_progress"]).ok();
    env.at(t0, "engineer", &["status", "BL-1", "blocked", "--note", "waiting for the DBA"]).ok();
    let late = "2025-11-21T18:00:00Z";
    env.circe(["reap"]).now(late).run().ok();
    let look = env.at(late, "engineer-2", &["claim", "BL-1", "--dry-run", "--json"]);
    assert_eq!(look.ok().json()["note"], "waiting for the DBA", "{}", look.show());
    let o = env.at(late, "engineer-2", &["claim", "BL-1"]);
    assert!(o.ok().stdout.contains("  note: waiting for the DBA\n"), "{}", o.show());
    assert_eq!(env.record("BL-1").note, None, "the claim clears it");
}

/// The edges of "a reply goes back to whoever sent it": a TX task named by its msg-id is
/// answered to whoever opened it; a task message names who may take it, so it needs --to;
/// a retired asker is no default, and its question is answered wherever the answerer says;
/// a task message's `in_reply_to` must name a message too.
#[test]
fn a_reply_without_to_goes_where_it_can_or_says_why_not() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let t =
        sent(&env, "coordinator", &["--to", "role:engineer", "--intent", "task", "--summary", "x"]);
    env.as_("engineer", &["claim", &t]).ok();
    env.as_("engineer", &["status", &t, "in_progress"]).ok();
    let done = env.as_(
        "engineer",
        &["send", "--json", "--intent", "task-complete", "--in-reply-to", &t, "--summary", "done"],
    );
    assert_eq!(done.ok().json()["delivered"][0]["box"], "inbox:coordinator", "{}", done.show());
    assert_eq!(done.json()["task_inherited"], true, "{}", done.show());
    let q =
        sent(&env, "engineer", &["--to", "role:qa", "--intent", "question", "--summary", "os?"]);
    let before = env.state();
    let o = env.as_(
        "qa",
        &["send", "--intent", "fix_bug", "--task", "B-1", "--in-reply-to", &q, "--summary", "x"],
    );
    o.code(2);
    assert!(
        o.stderr.contains("--to is required: a task message names who may take it"),
        "{}",
        o.show()
    );
    let o = env.as_(
        "coordinator",
        &[
            "send",
            "--to",
            "role:engineer",
            "--intent",
            "task",
            "--in-reply-to",
            "no-such-msg",
            "--summary",
            "x",
        ],
    );
    o.code(5);
    assert_unchanged(&before, &env.state());
    let q2 =
        sent(&env, "engineer-2", &["--to", "role:qa", "--intent", "question", "--summary", "db?"]);
    env.as_("coordinator", &["agent", "retire", "engineer-2"]).ok();
    let o = env.as_("qa", &["send", "--intent", "answer", "--in-reply-to", &q2, "--summary", "pg"]);
    o.code(2);
    assert!(o.stderr.contains("is from engineer-2, who is retired"), "{}", o.show());
    env.as_(
        "qa",
        &[
            "send",
            "--to",
            "role:engineer",
            "--intent",
            "answer",
            "--in-reply-to",
            &q2,
            "--summary",
            "pg",
        ],
    )
    .ok();
    // The `--` hint is check's alone.
    let o = env.as_(
        "qa",
        &["send", "--to", "qa", "--intent", "inform", "--summary", "check", "--run", "x"],
    );
    o.code(2);
    assert!(!o.stderr.contains("goes after `--`"), "{}", o.show());
}

/// A task past its deadline is not handed on (it would wait for nobody and expire unseen),
/// unless the handoff sets a new deadline.
#[test]
fn a_task_past_its_deadline_is_handed_on_only_with_a_new_one() {
    let env = Env::new();
    env.open_task_due("D-2", "role:engineer", "2025-11-21T18:00:00Z");
    env.at("2025-11-21T17:00:00Z", "engineer", &["claim", "D-2"]).ok();
    let late = "2025-11-21T18:00:01Z";
    let before = env.state();
    let hand = ["send", "--to", "role:qa", "--intent", "test", "--task", "D-2", "--summary", "t"];
    let o = env.at(late, "engineer", &hand);
    o.code(3);
    assert!(o.stderr.contains("cannot be handed on: its deadline"), "{}", o.show());
    assert_unchanged(&before, &env.state());
    let again = [&hand[..], &["--deadline", "2025-11-22T18:00:00Z"]].concat();
    env.at(late, "engineer", &again).ok();
    env.at(late, "qa", &["claim", "D-2"]).ok();
}

/// circe's escalation of a parked task takes no answer: an `answer` is refused and it stays
/// among the coordinator's questions while the task is parked; a release settles it.
#[test]
fn circes_escalation_is_settled_by_acting_on_the_task_not_by_an_answer() {
    let env = Env::new();
    let cfg = env.circe(["config"]).run().stdout.clone();
    env.set_config(&cfg.replace("max_attempts: 3", "max_attempts: 1"));
    env.open_task("P-1");
    env.at("2025-11-21T17:00:00Z", "engineer", &["claim", "P-1"]).ok();
    env.circe(["reap"]).now("2025-11-21T18:00:00Z").run().ok();
    assert_eq!(env.record("P-1").status.as_str(), "parked");
    let qs = env.as_("coordinator", &["questions", "--json"]);
    let id = qs.ok().json()["questions"][0]["msg_id"].as_str().unwrap().to_string();
    // It expects no answer, and `--json` says so (a script follows `expects`).
    assert_eq!(
        qs.json()["questions"][0]["expects_reply"],
        serde_json::Value::Null,
        "{}",
        qs.show()
    );
    let before = env.state();
    let o = env.as_(
        "coordinator",
        &[
            "send",
            "--to",
            "agent:engineer",
            "--intent",
            "answer",
            "--in-reply-to",
            &id,
            "--summary",
            "looking",
        ],
    );
    o.code(3);
    assert!(
        o.stderr.contains("circe's escalation of the parked task P-1: it takes no answer"),
        "{}",
        o.show()
    );
    // Its hint, followed as printed, acts as the agent that asked.
    assert!(o.stderr.contains("`circe --agent coordinator release --force P-1`"), "{}", o.show());
    assert_unchanged(&before, &env.state());
    let open = |env: &Env| {
        env.as_("coordinator", &["questions", "--json"]).json()["questions"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(open(&env), 1);
    // An update in reply says more without settling it.
    env.as_(
        "coordinator",
        &[
            "send",
            "--to",
            "agent:engineer",
            "--intent",
            "update",
            "--in-reply-to",
            &id,
            "--summary",
            "looking",
        ],
    )
    .ok();
    assert_eq!(open(&env), 1);
    env.as_("coordinator", &["release", "--force", "P-1", "--reason", "flaky runner fixed"]).ok();
    assert_eq!(open(&env), 0);
}

/// A coordinator's prime names `circe archive` for cron only where the root keeps an
/// archive (a folder); a hand-on run again says it waits already as asked.
#[test]
fn prime_names_what_the_root_runs_and_a_hand_on_run_again_says_it_is_done() {
    let env = Env::new();
    let o = env.as_("coordinator", &["prime", "--json"]);
    let lines = o.ok().json()["coordinating"].to_string();
    assert_eq!(lines.contains("circe archive"), !crate::common::pg_mode(), "{lines}");
    assert!(lines.contains("circe reap"), "{lines}");
    env.open_task("H-1");
    env.as_("engineer", &["claim", "H-1"]).ok();
    let hand = ["send", "--to", "role:qa", "--intent", "test", "--task", "H-1", "--summary", "t"];
    env.as_("engineer", &hand).ok();
    let again = env.as_("engineer", &hand);
    again.code(4);
    assert!(again.stderr.contains("it was handed on already, nothing to do"), "{}", again.show());
}

/// `wait --for reply:ASK` waits for the ask's ask-response alone: an `update` in reply does
/// not end it, the ask's expiry ends it with exit 3 (and a wait begun later at once), never
/// as "answered".
#[test]
fn a_wait_for_an_asks_reply_ends_on_its_answer_or_its_expiry() {
    let env = Env::new();
    let a = sent(
        &env,
        "engineer",
        &[
            "--to",
            "agent:qa",
            "--intent",
            "ask",
            "--summary",
            "floats?",
            "--deadline",
            "2025-11-21T18:00:00Z",
        ],
    );
    env.as_("qa", &["send", "--intent", "update", "--in-reply-to", &a, "--summary", "looking"])
        .ok();
    let reply = format!("reply:{a}");
    let w = env.circe(["wait", "--for", &reply, "--timeout", "300ms"]).agent("engineer").run();
    w.code(7);
    env.circe(["reap"]).now("2025-11-21T18:00:01Z").run().ok();
    let w = env.circe(["wait", "--for", &reply, "--timeout", "5s"]).agent("engineer").run();
    w.code(3);
    assert!(w.stderr.contains("expired unanswered"), "{}", w.show());
    let a2 = sent(&env, "engineer", &["--to", "agent:qa", "--intent", "ask", "--summary", "ints?"]);
    env.as_("qa", &["send", "--intent", "ask-response", "--in-reply-to", &a2, "--summary", "yes"])
        .ok();
    let w = env.circe(["wait", "--for", &format!("reply:{a2}"), "--json"]).agent("engineer").run();
    assert_eq!(w.ok().json()["box"], "inbox:engineer", "{}", w.show());
}

/// `done` of a question nobody answered, by the last agent holding it, is refused: filed, it
/// would stay open for its asker with nobody left to answer. The hint, followed as printed,
/// answers it; then it files. A copy another agent still holds files at once.
#[test]
fn the_last_copy_of_an_unanswered_question_is_answered_before_it_is_filed() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let q =
        sent(&env, "qa", &["--to", "role:engineer", "--intent", "question", "--summary", "os?"]);
    env.as_("engineer", &["done", &q]).ok();
    let before = env.state();
    let o = env.as_("engineer-2", &["done", &q]);
    o.code(3);
    assert!(
        o.stderr.contains(&format!("{q} is qa's question and nothing answers it")),
        "{}",
        o.show()
    );
    assert_unchanged(&before, &env.state());
    let hint = format!(
        "`circe --agent engineer-2 send --intent answer --in-reply-to {q} --summary \"...\"`, then `circe --agent engineer-2 done {q}`"
    );
    assert!(o.stderr.contains(&hint), "{}", o.show());
    env.as_("engineer-2", &["send", "--intent", "answer", "--in-reply-to", &q, "--summary", "no"])
        .ok();
    env.as_("engineer-2", &["done", &q]).ok();
    let asked = env.as_("qa", &["questions", "--json"]);
    assert_eq!(asked.json()["questions"].as_array().map(Vec::len), Some(0), "{}", asked.show());
    // By task id: the task's messages in the agent's boxes, a question among them.
    let open = ["send", "--to", "agent:engineer", "--intent", "fix_bug", "--task", "B-1"];
    env.as_("coordinator", &[&open[..], &["--summary", "x"]].concat()).ok();
    let ask = ["--to", "agent:engineer", "--intent", "question", "--task", "B-1"];
    sent(&env, "qa", &[&ask[..], &["--summary", "db?"]].concat());
    sent(
        &env,
        "qa",
        &["--to", "agent:engineer", "--intent", "inform", "--task", "B-1", "--summary", "fyi"],
    );
    let before = env.state();
    let o = env.as_("engineer", &["done", "B-1"]);
    o.code(3);
    assert!(o.stderr.contains("then `circe --agent engineer done B-1`"), "{}", o.show());
    assert_unchanged(&before, &env.state());
}

/// A question past its deadline, unread, is filed into LOGS by `reap`: when the last copy
/// goes, its asker is told once (circe's `update` in reply), it is no longer open, and a wait
/// for its reply, already running or started after, ends with exit 3. A question answered
/// in time tells nobody.
#[test]
fn the_asker_of_a_question_filed_unread_is_told() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let due =
        ["--to", "role:engineer", "--intent", "question", "--deadline", "2025-11-21T18:00:00Z"];
    let q = sent(&env, "qa", &[&due[..], &["--summary", "os?"]].concat());
    let answered = sent(&env, "qa", &[&due[..], &["--summary", "db?"]].concat());
    env.as_(
        "engineer",
        &["send", "--intent", "answer", "--in-reply-to", &answered, "--summary", "pg"],
    )
    .ok();
    let reply = format!("reply:{q}");
    let late = "2025-11-21T18:00:01Z";
    let w = std::thread::scope(|s| {
        let waiter =
            s.spawn(|| env.circe(["wait", "--for", &reply, "--timeout", "20s"]).agent("qa").run());
        std::thread::sleep(std::time::Duration::from_millis(700));
        env.circe(["reap"]).now(late).run().ok();
        waiter.join().unwrap()
    });
    w.code(3);
    assert!(w.stderr.contains("passed its deadline unread and was filed"), "{}", w.show());
    env.circe(["reap"]).now(late).run().ok();
    let notices = circe_notices(&env, "qa");
    assert_eq!(notices, vec![q.clone()], "{notices:?}");
    let open = env.as_("qa", &["questions", "--json"]);
    assert_eq!(open.json()["questions"].as_array().map(Vec::len), Some(0), "{}", open.show());
    let w = env.circe(["wait", "--for", &reply, "--timeout", "5s"]).agent("qa").run();
    w.code(3);
    // An answer that comes after all the same is what the wait returns.
    let answer = ["send", "--intent", "answer", "--in-reply-to", &q, "--summary", "late"];
    env.at("2025-11-21T18:30:00Z", "engineer", &answer).ok();
    let w = env.circe(["wait", "--for", &reply, "--timeout", "5s", "--json"]).agent("qa").run();
    assert_eq!(w.ok().json()["already"], true, "{}", w.show());
}

/// Overlapping `reap`s (two cron jobs) tell a question's asker once: the notice is told
/// holding the question's id, and each looks for it first.
#[test]
fn reaps_at_once_tell_the_asker_once() {
    let env = Env::new();
    for n in 0..4 {
        let due = [
            "--to",
            "agent:engineer",
            "--intent",
            "question",
            "--deadline",
            "2025-11-21T18:00:00Z",
        ];
        sent(&env, "qa", &[&due[..], &["--summary", &format!("q{n}?")]].concat());
    }
    let late = "2025-11-21T18:00:01Z";
    std::thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| env.circe(["reap"]).now(late).run());
        }
    });
    let mut told = circe_notices(&env, "qa");
    assert_eq!(told.len(), 4, "each asked once: {told:?}");
    told.dedup();
    assert_eq!(told.len(), 4, "{told:?}");
}

/// Two holders filing their copies of one unanswered question at the same moment: one is
/// refused (the filings go one after the other), so a copy stays for someone to answer.
#[test]
fn two_holders_filing_a_question_at_once_leave_one_copy() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    for n in 0..6 {
        let ask = ["--to", "role:engineer", "--intent", "question"];
        let q = sent(&env, "qa", &[&ask[..], &["--summary", &format!("os {n}?")]].concat());
        let codes: Vec<i32> = std::thread::scope(|s| {
            let a = s.spawn(|| env.as_("engineer", &["done", &q]).code);
            let b = s.spawn(|| env.as_("engineer-2", &["done", &q]).code);
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 3], "round {n}: {codes:?}");
    }
}

/// `inbox` and `questions` list oldest first by time, not by the time's text (which drops
/// `.000`: `…00.500Z` sorts before `…00Z` as text).
#[test]
fn lists_are_oldest_first_within_one_second() {
    let env = Env::new();
    for (at, what) in [("2025-11-21T17:00:00Z", "first"), ("2025-11-21T17:00:00.500Z", "second")] {
        let ask = ["send", "--to", "agent:engineer", "--intent", "question", "--summary", what];
        env.at(at, "qa", &ask).ok();
    }
    let summaries = |o: &crate::common::Out, key: &str| -> Vec<String> {
        o.json()[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["summary"].as_str().unwrap().to_string())
            .collect()
    };
    let inbox = env.at("2025-11-21T17:01:00Z", "engineer", &["inbox", "--json"]);
    assert_eq!(summaries(&inbox, "messages"), ["first", "second"], "{}", inbox.show());
    let qs = env.at("2025-11-21T17:01:00Z", "engineer", &["questions", "--json"]);
    assert_eq!(summaries(&qs, "questions"), ["first", "second"], "{}", qs.show());
}

/// `reap` filing one holder's overdue copy while another holder files its own: a copy stays,
/// or the asker is told; never both copies gone in silence.
#[test]
fn reap_and_done_at_once_never_file_a_question_in_silence() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let late = "2025-11-21T18:00:01Z";
    for n in 0..6 {
        let due = ["--to", "role:engineer", "--intent", "question", "--deadline", late];
        let q = sent(&env, "qa", &[&due[..], &["--summary", &format!("os {n}?")]].concat());
        // engineer-2 takes its copy first (reap files INBOX copies only), then both at once.
        env.as_("engineer-2", &["take", &q]).ok();
        std::thread::scope(|s| {
            s.spawn(|| env.circe(["reap"]).now(late).run());
            s.spawn(|| env.at(late, "engineer-2", &["done", &q]));
        });
        let copies = env
            .state()
            .keys()
            .filter(|k| (k.contains("/INBOX/") || k.contains("/WORKSPACE/")) && k.contains("_qa-"))
            .count();
        let told = circe_notices(&env, "qa").contains(&q);
        assert!(copies > 0 || told, "round {n}: no copy left and qa not told");
        // Leave the root clean for the next round.
        for who in ["engineer", "engineer-2"] {
            let _ = env
                .as_(who, &["send", "--intent", "answer", "--in-reply-to", &q, "--summary", "-"]);
            let _ = env.as_(who, &["done", &q]);
        }
    }
}

/// reap tells a question's asker its last copy was filed unread, and a holder takes the
/// copy up at the same moment: either the copy is filed and the asker told, or it is taken
/// and the asker is not told (never "filed unread" while the copy sits in a WORKSPACE).
#[test]
fn reap_and_take_at_once_never_tell_a_taken_question_filed() {
    let env = Env::new();
    let late = "2025-11-21T18:00:01Z";
    for n in 0..8 {
        let due = ["--to", "engineer", "--intent", "question", "--deadline", late];
        let q = sent(&env, "qa", &[&due[..], &["--summary", &format!("os {n}?")]].concat());
        std::thread::scope(|s| {
            s.spawn(|| env.circe(["reap"]).now(late).run());
            s.spawn(|| env.at(late, "engineer", &["take", &q]));
        });
        let taken = env.state().keys().any(|k| k.contains("/WORKSPACE/") && k.contains("_qa-"));
        let told = circe_notices(&env, "qa").contains(&q);
        assert!(!(taken && told), "round {n}: qa told {q} was filed unread, yet engineer took it");
        assert!(taken || told, "round {n}: {q} neither taken nor told");
        let _ = env.as_(
            "engineer",
            &["send", "--intent", "answer", "--in-reply-to", &q, "--summary", "-"],
        );
        let _ = env.as_("engineer", &["done", &q]);
    }
}

/// The hints of three refusals, followed as printed, run: an archived task that is not
/// there points at a search the command line takes, a msg id not found at an inbox read as
/// an agent, and an events cursor that is a chat cursor at the removal of that one.
#[test]
fn hints_of_things_not_found_lead_to_commands_that_run() {
    let env = Env::local();
    let restore = env.circe(["archive", "restore", "AUTH-999", "--to", "x"]).run();
    restore.code(5);
    assert!(restore.stderr.contains("`circe archive search --text WORDS`"), "{}", restore.show());
    let search = env.circe(["archive", "search", "--text", "jwt"]).run();
    assert_ne!(search.code, 2, "the hinted search is no usage error: {}", search.show());
    let thread = env.circe(["thread", "nosuch"]).run();
    thread.code(5);
    assert!(thread.stderr.contains("`circe --agent NAME inbox`"), "{}", thread.show());
    env.circe(["chat", "say", "--to", "coordinator", "hi"]).agent("qa").run().ok();
    env.circe(["chat", "watch", "--once", "--cursor", "qa"]).run().ok();
    let removed = env.circe(["cursors", "--remove", "qa"]).run();
    removed.code(5);
    let hinted = "`circe cursors --remove qa --kind chat`";
    assert!(removed.stderr.contains(hinted), "{}", removed.show());
    env.circe(["cursors", "--remove", "qa", "--kind", "chat"]).run().ok();
    // An empty `reply:` is told what to name, not about `send`'s --msg-id.
    let wait = env.circe(["wait", "--for", "reply:", "--timeout", "1s"]).agent("qa").run();
    assert!(wait.stderr.contains("`--for reply:MSGID`"), "{}", wait.show());
    assert!(!wait.stderr.contains("--msg-id"), "{}", wait.show());
}

/// A readdress to the address a waiting task has is "already" only when someone there may
/// take it: a task left addressed to a retired agent is refused as any such readdress is,
/// so the coordinator learns it must address it anew.
#[test]
fn a_readdress_to_the_same_address_that_nobody_there_may_take_is_refused() {
    let env = Env::new();
    env.circe(["agent", "add", "bob", "--role", "engineer"]).run().ok();
    let to = ["send", "--to", "agent:bob", "--intent", "fix_bug", "--task", "B-9"];
    env.as_("coordinator", &[&to[..], &["--summary", "x"]].concat()).ok();
    let same = ["--json", "readdress", "B-9", "--to", "agent:bob"];
    assert_eq!(env.as_("coordinator", &same).ok().json()["already"], true);
    env.as_("coordinator", &["agent", "retire", "bob"]).ok();
    let before = env.state();
    let o = env.as_("coordinator", &same);
    o.code(3);
    assert!(o.stderr.contains("no active agent at agent:bob"), "{}", o.show());
    crate::common::assert_unchanged(&before, &env.state());
}

/// A holder's move on a waiting task (`take`, `status`, `heartbeat`, `check`) hints "claim
/// it first" only to an agent the claim would not refuse; another is told who may take it
/// and to ask a coordinator to readdress it, as the refused claim says. `take` names the
/// task in `details.task_id`, as the task's other refusals do.
#[test]
fn a_holders_move_on_a_task_one_may_not_take_hints_no_claim() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let open = ["send", "--to", "agent:engineer-2", "--intent", "fix_bug", "--task", "BUG-1"];
    env.as_("coordinator", &[&open[..], &["--summary", "for engineer-2 only"]].concat()).ok();
    let before = env.state();
    for (agent, args) in [
        ("qa", &["take", "BUG-1"][..]),
        ("engineer", &["status", "BUG-1", "in_progress"][..]),
        ("engineer", &["heartbeat", "BUG-1"][..]),
        ("engineer", &["check", "BUG-1", "tests_passed=true"][..]),
        ("engineer", &["status", "BUG-1", "claimed"][..]),
    ] {
        let o = env.as_(agent, args);
        o.code(3);
        assert!(!o.stderr.contains("claim it first"), "{}", o.show());
        assert!(!o.stderr.contains(" claim BUG-1"), "{}", o.show());
        assert!(o.stderr.contains("meant for agent engineer-2 alone"), "{}", o.show());
        let ask =
            format!("`circe --agent {agent} send --to role:coordinator --intent request_help");
        assert!(o.stderr.contains(&ask), "{}", o.show());
    }
    assert_unchanged(&before, &env.state());
    let o = env.as_("qa", &["take", "BUG-1", "--json"]);
    o.code(3);
    assert_eq!(o.json()["error"]["details"]["task_id"], "BUG-1", "{}", o.show());
    // The one it is meant for is told to claim it, and the claim runs.
    let o = env.as_("engineer-2", &["status", "BUG-1", "in_progress"]);
    o.code(3);
    assert!(
        o.stderr.contains("claim it first: `circe --agent engineer-2 claim BUG-1`"),
        "{}",
        o.show()
    );
    env.as_("engineer-2", &["claim", "BUG-1"]).ok();
}

/// With a check declared in circe.yaml, every hint and `prime` name the form that records
/// it (`--run NAME`, nothing after it), never the `-- CMD` form circe refuses for it, and
/// none suggests asserting; followed as printed, it runs.
#[test]
fn a_declared_check_is_hinted_in_the_form_that_runs() {
    let env = Env::new();
    let cfg = env.circe(["config"]).run().stdout + "checks:\n  tests_passed: {run: \"true\"}\n";
    env.set_config(&cfg);
    let open = ["send", "--to", "role:qa", "--intent", "test", "--task", "BUG-1", "--summary", "x"];
    env.as_("engineer", &open).ok();
    env.as_("qa", &["claim", "BUG-1"]).ok();
    env.as_("qa", &["status", "BUG-1", "in_progress"]).ok();
    // qa's tasks have declared checks only: no `-- CMD` line.
    let prime = env.as_("qa", &["prime"]);
    let lines: Vec<&str> = prime.stdout.lines().filter(|l| l.contains(" check TASK")).collect();
    assert!(!lines.is_empty(), "{}", prime.show());
    assert!(lines.iter().all(|l| !l.contains("-- CMD") && !l.contains("=true")), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("circe --agent qa check TASK --run tests_passed ")),
        "{lines:#?}"
    );
    for args in [&["check", "BUG-1"][..], &["check", "BUG-1", "tests_passed"][..]] {
        let o = env.as_("qa", args);
        o.code(2);
        let hint = o.stderr.lines().find(|l| l.starts_with("hint: ")).unwrap_or_default();
        let run =
            "circe --agent qa check BUG-1 --run tests_passed (circe.yaml declares its command)";
        assert!(hint.contains(run) && !hint.contains("--run tests_passed --"), "{}", o.show());
        assert!(!hint.contains("=true"), "{}", o.show());
    }
    env.as_("qa", &["check", "BUG-1", "--run", "tests_passed"]).ok();
}

/// A hint that names a command the acting agent runs names the agent too (`--agent`):
/// followed as printed it is never "no acting agent".
#[test]
fn hints_name_the_acting_agent() {
    let env = Env::new();
    let o = env.as_("qa", &["wait", "--for", "inbox", "--claim"]);
    o.code(2);
    assert!(
        o.stderr.contains("hint: circe --agent qa wait --for claimable --claim"),
        "{}",
        o.show()
    );
    // An ask that expired unanswered: ask again, as the asker.
    let a = sent(
        &env,
        "engineer",
        &[
            "--to",
            "agent:qa",
            "--intent",
            "ask",
            "--summary",
            "x",
            "--deadline",
            "2025-11-21T18:00:00Z",
        ],
    );
    env.circe(["reap"]).now("2025-11-21T18:00:01Z").run().ok();
    let w = env.as_("engineer", &["wait", "--for", &format!("reply:{a}"), "--timeout", "5s"]);
    w.code(3);
    assert!(w.stderr.contains("`circe --agent engineer send --intent ask ...`"), "{}", w.show());
    // `status T parked` is no move: the moves it may mean, for this agent and task.
    env.open_task("P-1");
    env.as_("engineer", &["claim", "P-1"]).ok();
    let o = env.as_("engineer", &["status", "P-1", "parked"]);
    o.code(3);
    assert!(o.stderr.contains("`circe --agent engineer release P-1`"), "{}", o.show());
}
