//! `circe send`: flags, drafts, templates, registry refusals, broadcasts, collisions.

use serde_json::json;

use crate::common::{Env, assert_unchanged};

const DRAFT: &str = "# MESSAGE\nto: qa\nintent: inform\n\n## Summary\nthe build is green\n";

/// A refused message writes nothing anywhere, not even the lock file of its sender's
/// counter (a sender's first send that the rules refuse).
#[test]
fn a_refused_send_leaves_no_file_at_all() {
    local_only!("lists the root's folder");
    let env = Env::new();
    let before = crate::common::tree(&env.root(), &[]);
    let refused = [
        &["send", "--to", "coordinator", "--intent", "implement_feature", "--task", "T5"][..],
        &["send", "--to", "nobody", "--intent", "inform", "--summary", "x"][..],
        &["send", "--to", "coordinator", "--intent", "no_such_intent", "--summary", "x"][..],
    ];
    for args in refused {
        let o = env.as_("qa", args);
        assert!(o.code == 3 || o.code == 5, "{}", o.show());
    }
    assert_eq!(before, crate::common::tree(&env.root(), &[]));
}

/// A send opening a task that fails before its commit point (each store write failing in
/// turn) leaves no record and no lock file of the task; nor does a command about a task
/// that does not exist. One that fails after its commit point leaves the task.
#[test]
fn a_task_that_never_was_leaves_no_lock_file() {
    local_only!("fails the folder engine's writes and lists locks/");
    let env = Env::new();
    let left = |env: &Env, task: &str| -> Vec<String> {
        let mine =
            |f: &String| f.starts_with(&format!("{task}.")) || *f == format!("task-{task}.lock");
        [env.ls_all("locks"), env.ls_all("TASKS")].concat().into_iter().filter(mine).collect()
    };
    let mut failed = 0;
    for n in 1.. {
        let task = format!("F-{n}");
        let args = ["--json", "send", "--to", "engineer", "--intent", "implement_feature"];
        let o = env
            .circe([&args[..], &["--task", &task, "--summary", "x"]].concat())
            .agent("coordinator")
            .var("CIRCE_FAIL_IO", &n.to_string())
            .run();
        if o.code == 0 {
            break;
        }
        assert_eq!(o.code, 1, "CIRCE_FAIL_IO={n}: {}", o.show());
        if o.json()["error"]["details"]["committed"] == true {
            continue; // failed after its commit point: the task stands
        }
        failed += 1;
        assert_eq!(left(&env, &task), Vec::<String>::new(), "CIRCE_FAIL_IO={n}: {}", o.show());
    }
    assert!(failed > 0, "no write failed before the commit point: the test saw nothing");
    for args in [
        &["show", "NOPE-1"][..],
        &["claim", "NOPE-1"][..],
        &["status", "NOPE-1", "in_progress"][..],
        &["release", "NOPE-1"][..],
        &["heartbeat", "NOPE-1"][..],
    ] {
        let o = env.as_("engineer", args);
        assert_eq!(o.code, 5, "{}", o.show());
        assert_eq!(left(&env, "NOPE-1"), Vec::<String>::new(), "{}", o.show());
    }
}

/// An answer whose `--in-reply-to` is a part of an id (as `show` takes one) is refused with
/// the whole id in the hint.
#[test]
fn an_answer_to_part_of_an_id_is_told_the_whole_id() {
    let env = Env::new();
    let q = env.as_("engineer", &["send", "--to", "coordinator", "--intent", "question", "--json"]);
    let id = q.json()["msg_id"].as_str().unwrap().to_string();
    let tail = id.rsplit('-').next().unwrap();
    let args = ["send", "--to", "agent:engineer", "--intent", "answer", "--in-reply-to", tail];
    let o = env.as_("coordinator", &args);
    o.code(5);
    assert!(o.stderr.contains(&format!("did you mean `{id}`?")), "{}", o.show());
}

#[test]
fn send_by_flags_to_an_inbox() {
    let env = Env::new();
    let out = env.as_(
        "engineer",
        &["send", "--to", "qa", "--intent", "inform", "--summary", "hello qa", "--priority", "low"],
    );
    out.ok();
    snap!(env, out);
    let files = env.ls("AGENTS/qa/INBOX");
    assert_eq!(files, ["20251121_170000_engineer-qa_inform.md"]);
    let text = env.read(&format!("AGENTS/qa/INBOX/{}", files[0]));
    for want in [
        "from: engineer",
        "to: qa",
        "intent: inform",
        "created_at: 2025-11-21T17:00:00Z",
        "## Summary\nhello qa",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert!(env.ls("NEW_MESSAGES").is_empty());
    assert!(!env.root().join("TASKS").read_dir().unwrap().any(|_| true), "no task for inform");
    let ev = env.events();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["event"], "send");
    // Each recipient's copy is named, so a consumer needs no search to open it.
    assert_eq!(ev[0]["files"][0]["box"], "inbox:qa");
    assert_eq!(ev[0]["files"][0]["file"], "20251121_170000_engineer-qa_inform.md");
    assert_eq!(ev[0]["id"], 1, "events are numbered from 1");
}

#[test]
fn a_task_intent_opens_a_task_in_new_messages() {
    let env = Env::new();
    let out = env.open_task("AUTH-012");
    snap!(env, out);
    assert_eq!(
        env.ls("NEW_MESSAGES"),
        ["20251121_170000_coordinator-all_implement-feature_AUTH-012.md"]
    );
    let r = env.record("AUTH-012");
    assert_eq!(r.status.as_str(), "new");
    assert_eq!(r.owner, None);
    assert_eq!(r.epoch, 0);
    assert_eq!(r.to, "all");
    assert_eq!(env.read("TASKS/AUTH-012.checks"), "tests_passed: false\n");
    let ev = env.events();
    assert_eq!(
        (&ev[0]["event"], &ev[0]["from"], &ev[0]["to"]),
        (&json!("open"), &json!(null), &json!("new")),
        "an open has no status before it: `from` is absent, never a placeholder"
    );
    // Nobody's INBOX got it.
    for a in ["engineer", "qa", "coordinator"] {
        assert!(env.ls(&format!("AGENTS/{a}/INBOX")).is_empty(), "{a}");
    }
}

#[test]
fn send_by_file_and_by_stdin_fill_from_and_created_at() {
    let env = Env::new();
    let draft = env.path().join("draft.md");
    std::fs::write(&draft, DRAFT).unwrap();
    env.as_("engineer", &["send", "--file", draft.to_str().unwrap()]).ok();
    env.circe(["send", "--file", "-"])
        .agent("engineer")
        .now("2025-11-21T17:00:05Z")
        .stdin(DRAFT.as_bytes())
        .run()
        .ok();
    let files = env.ls("AGENTS/qa/INBOX");
    assert_eq!(
        files,
        ["20251121_170000_engineer-qa_inform.md", "20251121_170005_engineer-qa_inform.md"]
    );
    let stdin_copy = env.read(&format!("AGENTS/qa/INBOX/{}", files[1]));
    assert!(stdin_copy.contains("from: engineer"), "{stdin_copy}");
    assert!(stdin_copy.contains("created_at: 2025-11-21T17:00:05Z"), "{stdin_copy}");
    assert!(stdin_copy.contains("msg_id: 20251121T170005000Z-"), "{stdin_copy}");
}

#[test]
fn the_template_sends_as_is_for_its_role() {
    let env = Env::new();
    let t = env.circe(["send", "--template", "implement_feature"]).run();
    t.ok();
    snap!(env, t);
    // As printed, its placeholders are refused; filled in, its headers send as written.
    let sent = env.circe(["send", "--file", "-"]).agent("coordinator");
    sent.stdin(t.stdout.as_bytes()).run().code(3);
    let filled = fill_placeholders(&t.stdout).replace("TASK-001", "FEAT-1");
    let sent = env.circe(["send", "--file", "-"]).agent("coordinator");
    sent.stdin(filled.as_bytes()).run().ok();
    assert_eq!(env.record("FEAT-1").intent, "implement_feature");
    env.circe(["send", "--template", "no_such"]).run().code(5);
    // Asked by an agent, the template is from that agent: it sends as written.
    let t = env.circe(["send", "--template", "ask"]).agent("qa").run();
    assert!(
        t.stdout.contains("\nfrom: qa\n") && !t.stdout.contains("from: engineer"),
        "{}",
        t.show()
    );
    let filled = fill_placeholders(&t.stdout);
    env.circe(["send", "--file", "-"]).agent("qa").stdin(filled.as_bytes()).run().ok();
}

/// A template with each placeholder line (`<...>`, `- <...>`) filled in.
fn fill_placeholders(template: &str) -> String {
    template
        .lines()
        .map(|l| if l.trim_start_matches("- ").starts_with('<') { "filled in" } else { l })
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn a_from_line_naming_someone_else_is_refused() {
    let env = Env::new();
    let before = env.state();
    let text = format!("# MESSAGE\nfrom: qa\n{}", &DRAFT["# MESSAGE\n".len()..]);
    let out = env.circe(["send", "--file", "-"]).agent("engineer").stdin(text.as_bytes()).run();
    out.code(3);
    assert!(out.stderr.contains("from `qa`"), "{}", out.show());
    assert_unchanged(&before, &env.state());
}

/// Every registry refusal exits 3 and writes nothing anywhere.
#[test]
fn registry_refusals_write_nothing() {
    let env = Env::new();
    let before = env.state();
    let cases: [(&str, &[&str]); 6] = [
        ("coordinator", &["send", "--to", "engineer", "--intent", "frobnicate", "--summary", "x"]),
        (
            "engineer",
            &["send", "--to", "engineer", "--intent", "implement_feature", "--task", "T-1"],
        ),
        ("coordinator", &["send", "--to", "engineer", "--intent", "test", "--task", "T-1"]),
        ("coordinator", &["send", "--to", "qa", "--intent", "implement_feature", "--task", "T-1"]),
        ("qa", &["send", "--to", "engineer", "--intent", "status_update", "--summary", "x"]),
        ("coordinator", &["send", "--to", "engineer", "--intent", "implement_feature"]),
    ];
    let mut shown = Vec::new();
    for (agent, args) in cases {
        let out = env.as_(agent, args);
        out.code(3);
        shown.push(out);
        let j = env.as_(agent, &[args, &["--json"]].concat());
        j.code(3);
        assert_eq!(j.json()["error"]["kind"], "refused");
    }
    snap!(env, shown);
    assert_unchanged(&before, &env.state());
    if env.url.is_none() {
        assert!(env.root().join("tmp").read_dir().unwrap().next().is_none(), "tmp/ is empty");
    }
}

#[test]
fn unknown_recipient_is_not_found() {
    let env = Env::new();
    let before = env.state();
    env.as_("engineer", &["send", "--to", "nobody", "--intent", "inform", "--summary", "x"])
        .code(5);
    assert_unchanged(&before, &env.state());
}

#[test]
fn a_symlink_or_fifo_file_is_refused_unread() {
    let env = Env::new();
    let real = env.path().join("real.md");
    std::fs::write(&real, DRAFT).unwrap();
    let link = env.path().join("link.md");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let fifo = env.path().join("fifo.md");
    let st = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    let before = env.state();
    let out = env.as_("engineer", &["send", "--file", link.to_str().unwrap()]);
    out.code(3);
    assert!(out.stderr.contains("symbolic link"), "{}", out.show());
    // A FIFO nobody writes to would block a reader forever: circe must not open it blocking.
    let out = env.as_("engineer", &["send", "--file", fifo.to_str().unwrap()]);
    out.code(3);
    assert!(out.stderr.contains("not a regular file"), "{}", out.show());
    env.as_("engineer", &["validate", fifo.to_str().unwrap()]).code(3);
    assert_unchanged(&before, &env.state());
}

#[test]
fn a_file_that_is_not_a_message_names_the_line() {
    let env = Env::new();
    let before = env.state();
    let bad = env.path().join("notes.md");
    std::fs::write(&bad, "# MESSAGE\nto: qa\nintent inform\n\nhi\n").unwrap();
    let out = env.as_("engineer", &["send", "--file", bad.to_str().unwrap()]);
    out.code(3);
    assert!(out.stderr.contains("line 3"), "{}", out.show());
    snap!(env, out);
    std::fs::write(&bad, "just some notes\n").unwrap();
    env.as_("engineer", &["send", "--file", bad.to_str().unwrap()]).code(3);
    assert_unchanged(&before, &env.state());
}

#[test]
fn broadcast_to_all_reaches_every_allowed_agent() {
    let env = Env::new();
    env.circe(["agent", "add", "qa-2", "--role", "qa"]).run().ok();
    env.as_("engineer", &["send", "--to", "all", "--intent", "inform", "--summary", "hi all"]).ok();
    for a in ["coordinator", "eagle", "qa", "qa-2", "rooster", "scribe"] {
        assert_eq!(env.ls(&format!("AGENTS/{a}/INBOX")).len(), 1, "{a}");
    }
    assert!(env.ls("AGENTS/engineer/INBOX").is_empty(), "not to the sender");
    // escalate may only reach coordinator and rooster.
    env.as_("engineer", &["send", "--to", "all", "--intent", "escalate", "--summary", "help"]).ok();
    for (a, n) in [("coordinator", 2), ("rooster", 2), ("qa", 1), ("scribe", 1)] {
        assert_eq!(env.ls(&format!("AGENTS/{a}/INBOX")).len(), n, "{a}");
    }
}

#[test]
fn a_role_reaches_each_agent_of_that_role() {
    let env = Env::new();
    env.circe(["agent", "add", "qa-2", "--role", "qa"]).run().ok();
    let out = env.as_(
        "engineer",
        &["send", "--to", "qa", "--intent", "inform", "--summary", "hi", "--json"],
    );
    out.ok();
    let boxes: Vec<String> = out.json()["delivered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["box"].as_str().unwrap().to_string())
        .collect();
    // `qa` is both an agent and a role: a role name means the role, every agent of it.
    assert_eq!(boxes, ["inbox:qa", "inbox:qa-2"]);
    // `agent:qa` is the one agent.
    let out = env.as_(
        "engineer",
        &["send", "--to", "agent:qa", "--intent", "inform", "--summary", "hi", "--json"],
    );
    out.ok();
    assert_eq!(out.json()["delivered"][0]["box"], "inbox:qa");
    assert_eq!(out.json()["delivered"].as_array().map(Vec::len), Some(1));
    local_only!("removes an agent's folder");
    env.circe(["agent", "add", "tester", "--role", "qa"]).run().ok();
    env.circe(["agent", "add", "tester-2", "--role", "qa"]).run().ok();
    std::fs::remove_dir_all(env.root().join("AGENTS/qa")).unwrap();
    let out = env.as_(
        "engineer",
        &["send", "--to", "qa", "--intent", "inform", "--summary", "hi", "--json"],
    );
    out.ok();
    let boxes: Vec<String> = out.json()["delivered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["box"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(boxes, ["inbox:qa-2", "inbox:tester", "inbox:tester-2"]);
}

/// A role no agent has yet is told as such, with how to make one; nothing is delivered.
#[test]
fn a_role_no_agent_has_says_how_to_make_one() {
    let env = Env::new();
    let cfg = env.read("circe.yaml").replace("  roles: []", "  roles: [devops]");
    env.set_config(&cfg);
    let out = env
        .as_("engineer", &["send", "--to", "role:devops", "--intent", "inform", "--summary", "hi"]);
    assert_eq!(out.code, 3, "{}", out.show());
    assert!(out.stderr.contains("`role:devops` reaches no agent"), "{}", out.show());
    assert!(out.stderr.contains("circe agent add NAME --role devops"), "{}", out.show());
    env.circe(["agent", "add", "dave", "--role", "devops"]).run().ok();
    env.as_("engineer", &["send", "--to", "role:devops", "--intent", "inform", "--summary", "hi"])
        .ok();
}

#[test]
fn two_messages_in_the_same_second_both_land() {
    let env = Env::new();
    for _ in 0..2 {
        env.as_("engineer", &["send", "--to", "qa", "--intent", "inform", "--summary", "same"])
            .ok();
    }
    let files = env.ls("AGENTS/qa/INBOX");
    assert_eq!(
        files,
        ["20251121_170000_engineer-qa_inform.2.md", "20251121_170000_engineer-qa_inform.md"]
    );
    let a = env.read(&format!("AGENTS/qa/INBOX/{}", files[0]));
    let b = env.read(&format!("AGENTS/qa/INBOX/{}", files[1]));
    assert_ne!(a, b, "different msg_ids");
}

/// A send cut off between its delivery and its events (PROTOCOLS.md section 6, step 6):
/// doctor says so, `--repair` logs them once under the names the copies got, and a retry of
/// a send with its own id finds the delivery and logs its events.
#[test]
fn a_send_cut_off_before_its_events_has_them_logged_by_repair() {
    local_only!("the journal lies in tmp/; a database logs in the delivery's transaction");
    let env = Env::new();
    let sends = |id: &str| about(&env, "send", id);
    let send = |summary: &'static str, id: &'static str| inform_run(&env, summary, id);
    send("first", "m-1").run().ok();
    // The same second: the second copy takes the next name (`.2.md`).
    send("second", "m-2").var("CIRCE_CRASH_AT", "send.logging").run().code(86);
    assert!(sends("m-2").is_empty());
    // The first one taken on: its name is free in the INBOX, the second's `.2.md` is still
    // found there.
    env.as_("engineer", &["take", "m-1"]).ok();
    let doc = env.circe(["doctor"]).run();
    assert_eq!(doc.code, 1, "{}", doc.show());
    assert!(
        doc.stderr.contains("a send or a move left the journal of its events"),
        "{}",
        doc.show()
    );
    let fixed = env.circe(["doctor", "--repair"]).run();
    assert!(fixed.stdout.contains("(1 events logged)"), "{}", fixed.show());
    let logged = sends("m-2");
    assert_eq!(logged.len(), 1, "{logged:?}");
    let file = logged[0]["files"][0]["file"].as_str().unwrap().to_string();
    assert!(file.ends_with(".2.md"), "{file}");
    assert!(env.read(&format!("AGENTS/engineer/INBOX/{file}")).contains("m-2"));
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(sends("m-2").len(), 1, "logged once");
    // Cut off after its events were logged: nothing is logged twice.
    send("third", "m-3").var("CIRCE_CRASH_AT", "send.logged").run().code(86);
    let fixed = env.circe(["doctor", "--repair"]).run();
    assert!(fixed.stdout.contains("they were logged already"), "{}", fixed.show());
    assert_eq!(sends("m-3").len(), 1);
    // A retry of the same send (its own id) finds the delivery, and logs its events first.
    retried_after_a_cut(&env, "fourth", "m-4");
    // Taken on before the repair under the numbered name it got: the event names that copy.
    send("fifth", "m-5").var("CIRCE_CRASH_AT", "send.logging").run().code(86);
    env.as_("engineer", &["take", "m-5"]).ok();
    env.circe(["doctor", "--repair"]).run().ok();
    let logged = sends("m-5");
    assert_eq!(logged.len(), 1, "{logged:?}");
    let file = logged[0]["files"][0]["file"].as_str().unwrap().to_string();
    assert!(env.read(&format!("AGENTS/engineer/WORKSPACE/{file}")).contains("m-5"), "{file}");
    assert!(env.ls_all("tmp").is_empty(), "{:?}", env.ls_all("tmp"));
    env.circe(["doctor"]).run().ok();
}

/// The clock of the cut-off sends below.
const AT: &str = "2030-01-01T00:00:00Z";

/// `send` of an `inform` to engineer, with its summary and its own message id.
fn inform(summary: &'static str, id: &'static str) -> [&'static str; 9] {
    ["send", "--to", "engineer", "--intent", "inform", "--summary", summary, "--msg-id", id]
}

/// That send, by coordinator at `AT`.
fn inform_run<'a>(env: &'a Env, summary: &'static str, id: &'static str) -> crate::common::Run<'a> {
    env.circe(inform(summary, id)).agent("coordinator").now(AT)
}

/// That send cut off before its events, then sent again: the retry finds the delivery
/// (`already_delivered`) and its `send` is logged once.
fn retried_after_a_cut(env: &Env, summary: &'static str, id: &'static str) {
    inform_run(env, summary, id).var("CIRCE_CRASH_AT", "send.logging").run().code(86);
    let again = env.circe([&["--json"][..], &inform(summary, id)].concat());
    let again = again.agent("coordinator").now(AT).run();
    assert_eq!(again.code, 0, "{}", again.show());
    assert_eq!(again.json()["already_delivered"], true, "{}", again.show());
    assert_eq!(about(env, "send", id).len(), 1);
}

/// The events of `kind` about message `id`.
fn about(env: &Env, kind: &str, id: &str) -> Vec<serde_json::Value> {
    env.events().into_iter().filter(|e| e["event"] == kind && e["msg_id"] == id).collect()
}

/// `doctor` sees one journal left (a database notices a client gone once its backend ends:
/// asked again for a while), and `doctor --repair` logs its one event.
fn settled(env: &Env) {
    let mut doc = env.circe(["doctor"]).run();
    for _ in 0..120 {
        if doc.code != 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        doc = env.circe(["doctor"]).run();
    }
    assert_eq!(doc.code, 1, "{}", doc.show());
    let said = "a send or a move left the journal of its events";
    assert!(doc.stderr.contains(said), "{}", doc.show());
    let fixed = env.circe(["doctor", "--repair"]).run();
    assert!(fixed.stdout.contains("(1 events logged)"), "{}", fixed.show());
}

/// On either engine, a send cut off between its delivery and its events, and a `take` cut
/// off between its move and its event: `doctor` says so, `doctor --repair` logs each event
/// once (the copy named as it lies), and a retry of a send (its own id) logs the first try's
/// event before it answers.
#[test]
fn a_send_or_a_move_cut_off_before_its_event_has_it_logged_once_on_either_engine() {
    let env = Env::new();
    let of = |kind: &str, id: &str| about(&env, kind, id);
    let send = |summary: &'static str, id: &'static str| inform_run(&env, summary, id);
    send("first", "m-1").run().ok();
    // The same second: the second copy takes the next name (`.2.md`).
    send("second", "m-2").var("CIRCE_CRASH_AT", "send.logging").run().code(86);
    assert!(of("send", "m-2").is_empty());
    settled(&env);
    let logged = of("send", "m-2");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0]["what"].as_str().unwrap().starts_with("logged late"), "{logged:?}");
    let file = logged[0]["files"][0]["file"].as_str().unwrap();
    assert!(file.ends_with(".2.md"), "{file}");
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(of("send", "m-2").len(), 1, "logged once");
    // A retry of the same send (its own id) finds the delivery, and logs its events first.
    retried_after_a_cut(&env, "third", "m-3");
    // A take cut off after its move, before its event.
    let take = ["take", "m-2"];
    env.circe(take).agent("engineer").var("CIRCE_CRASH_AT", "move.logging").run().code(86);
    let takes = || env.events().into_iter().filter(|e| e["event"] == "take").count();
    assert_eq!(takes(), 0);
    settled(&env);
    assert_eq!(takes(), 1);
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(takes(), 1);
    env.circe(["doctor"]).run().ok();
}

/// An expired ask's notice cut off before its `lapse` event: the ask's own filing later logs
/// a `lapse` about the same ask (into LOGS), which is not the notice's; repair logs the
/// notice's event.
#[test]
fn an_expired_asks_notice_cut_off_gets_its_own_event() {
    local_only!("the journal lies in tmp/");
    let env = Env::new();
    let ask = "---\nto: engineer\ntype: ask\nmsg-id: q-1\ndeadline: 2030-01-01T00:10:00Z\n---\n?\n";
    env.circe(["send", "--file", "-"])
        .agent("coordinator")
        .now("2030-01-01T00:00:00Z")
        .stdin(ask.as_bytes())
        .run()
        .ok();
    let later = "2030-01-01T01:00:00Z";
    let cut = env
        .circe(["reap"])
        .agent("coordinator")
        .now(later)
        .var("CIRCE_CRASH_AT", "send.logging")
        .run();
    assert_eq!(cut.code, 86, "{}", cut.show());
    env.circe(["reap"]).agent("coordinator").now(later).run().ok();
    let fixed = env.circe(["doctor", "--repair"]).now(later).run();
    assert!(fixed.stdout.contains("(1 events logged)"), "{}", fixed.show());
    let lapses: Vec<_> = env
        .events()
        .into_iter()
        .filter(|e| e["event"] == "lapse" && e["msg_id"] == "q-1")
        .map(|e| e["files"][0]["box"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(lapses.iter().any(|b| b == "inbox:coordinator"), "the notice's event: {lapses:?}");
}

/// A journal whose message still has copies staged (a numbered fan-out cut off after its
/// first copy landed, its sender's lock held by a live sender) waits: its event is logged
/// once the copies have landed, naming each where it lies.
#[test]
fn a_journal_waits_for_its_staged_copies() {
    local_only!("holds a sender's lock file by hand");
    let env = Env::new();
    let args = ["send", "--to", "all", "--intent", "inform", "--summary", "x", "--msg-id", "f-1"];
    let cut = env.circe(args).agent("coordinator").var("CIRCE_CRASH_AT", "seq.committed").run();
    assert_eq!(cut.code, 86, "{}", cut.show());
    let lock = std::fs::File::create(env.root().join("locks/seq-coordinator.lock")).unwrap();
    lock.lock().unwrap();
    let held = env.circe(["doctor", "--repair"]).run();
    assert!(
        held.stderr.contains("(waits: copies of its message are still staged)"),
        "{}",
        held.show()
    );
    let sends = || env.events().into_iter().filter(|e| e["event"] == "send").collect::<Vec<_>>();
    assert!(sends().is_empty());
    drop(lock);
    env.circe(["doctor", "--repair"]).run().ok();
    let logged = sends();
    assert_eq!(logged.len(), 1, "{logged:?}");
    let files = logged[0]["files"].as_array().unwrap();
    assert!(files.len() > 1);
    for f in files {
        let (b, name) = (f["box"].as_str().unwrap(), f["file"].as_str().unwrap());
        let agent = b.strip_prefix("inbox:").unwrap();
        assert!(env.read(&format!("AGENTS/{agent}/INBOX/{name}")).contains("f-1"), "{f}");
    }
    env.circe(["doctor"]).run().ok();
}

#[test]
fn a_move_cut_off_before_its_event_has_it_logged_by_repair() {
    local_only!("the journal lies in tmp/; a database logs apart from the move");
    let env = Env::new();
    let at = "2030-01-01T00:00:00Z";
    let send = |to: &str, id: &str| {
        let args = ["send", "--to", to, "--intent", "inform", "--summary", id, "--msg-id", id];
        env.circe(args).agent("coordinator").now(at).run().ok();
    };
    send("engineer", "m-1");
    let name = env.ls("AGENTS/engineer/INBOX")[0].clone();
    let eng = |args: &[&str], point: &str| {
        env.circe(args.to_vec()).agent("engineer").var("CIRCE_CRASH_AT", point).run().code(86);
    };
    // Cut off after the move, before its event: repair logs it, once.
    eng(&["take", "m-1"], "move.renamed");
    let doc = env.circe(["doctor"]).run();
    assert_eq!(doc.code, 1, "{}", doc.show());
    assert!(doc.stderr.contains("a send or a move left the journal"), "{}", doc.show());
    env.circe(["doctor", "--repair"]).run().ok();
    let takes = env.events().into_iter().filter(|e| e["event"] == "take").collect::<Vec<_>>();
    assert_eq!(takes.len(), 1, "{takes:?}");
    assert_eq!(takes[0]["files"][0]["box"], "workspace:engineer");
    assert_eq!(takes[0]["files"][0]["file"].as_str(), Some(name.as_str()));
    env.circe(["doctor", "--repair"]).run().ok();
    let dones = |env: &Env| env.events().into_iter().filter(|e| e["event"] == "done").count();
    eng(&["done", "m-1"], "move.renamed");
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(dones(&env), 1);
    assert!(env.ls_all("tmp").is_empty(), "{:?}", env.ls_all("tmp"));
    // Cut off before the move: nothing moved, nothing logged; and a copy of the same message
    // filed by another receiver is not taken for this one's.
    send("role:engineer", "m-2");
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    send("role:engineer", "m-3");
    env.as_("engineer-2", &["done", "m-3"]).ok();
    assert_eq!(dones(&env), 2);
    eng(&["done", "m-3"], "move.journaled");
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(dones(&env), 2, "the cut-off done was never made");
    assert_eq!(env.ls("AGENTS/engineer/INBOX").len(), 2, "m-2 and m-3 wait in the INBOX");
    // A take cut off before its move, then the message filed straight from the INBOX: the
    // take was never made, and the message in LOGS does not pass for it.
    let takes = |env: &Env| env.events().into_iter().filter(|e| e["event"] == "take").count();
    eng(&["take", "m-2"], "move.journaled");
    env.as_("engineer", &["done", "m-2"]).ok();
    env.circe(["doctor", "--repair"]).run().ok();
    assert_eq!(takes(&env), 1, "only m-1's take was made");
    assert!(env.ls_all("tmp").is_empty(), "{:?}", env.ls_all("tmp"));
    env.circe(["doctor"]).run().ok();
}

/// Events logged late name each copy as its statement made it: a `done` of one receiver's
/// copy names the LOGS name that copy got, not another receiver's; on a database root a
/// `send` names the name the copy was delivered under, even once it was filed under
/// another.
#[test]
fn events_logged_late_name_the_copies_their_statements_made() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    let to_both = ["send", "--to", "role:engineer", "--intent", "inform", "--summary", "x"];
    let both = ["--msg-id", "both-1"];
    env.circe([&to_both[..], &both].concat()).agent("coordinator").now(AT).run().ok();
    let cut = env.circe(["done", "both-1"]).agent("engineer-2").now(AT);
    cut.var("CIRCE_CRASH_AT", "move.logging").run().code(86);
    env.circe(["done", "both-1"]).agent("engineer").now(AT).run().ok();
    env.circe(["doctor", "--repair"]).run().ok();
    let done: Vec<String> = env
        .events()
        .into_iter()
        .filter(|e| e["event"] == "done")
        .map(|e| e["files"][0]["file"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(done.len(), 2, "{done:?}");
    assert_ne!(done[0], done[1], "each receiver's filed copy has its own name: {done:?}");
    if !crate::common::pg_mode() {
        return; // a folder's journal names a copy where it lies now (PROTOCOLS section 6)
    }
    // A send cut off, its copy then filed under a numbered name (another took `x.md`).
    inform_run(&env, "a", "first-1").run().ok();
    env.circe(["done", "first-1"]).agent("engineer").now(AT).run().ok();
    inform_run(&env, "b", "second-1").var("CIRCE_CRASH_AT", "send.logging").run().code(86);
    let delivered = env.ls("AGENTS/engineer/INBOX");
    env.circe(["done", "second-1"]).agent("engineer").now(AT).run().ok();
    env.circe(["doctor", "--repair"]).run().ok();
    let sent = about(&env, "send", "second-1");
    assert_eq!(sent.len(), 1, "{sent:?}");
    let file = sent[0]["files"][0]["file"].as_str().unwrap().to_string();
    assert!(
        delivered.contains(&file),
        "{file} is not the name it was delivered under: {delivered:?}"
    );
}

/// `validate` says a registry problem with the header line at fault and the closest name.
#[test]
fn validate_names_the_line_of_an_unknown_intent() {
    let env = Env::new();
    let f = env.path().join("typo.md");
    std::fs::write(
        &f,
        "# MESSAGE\nfrom: engineer\nto: qa\nintent: inforn\nstatus: new\n\
         created_at: 2026-01-01T00:00:00Z\n\n## Summary\nx\n",
    )
    .unwrap();
    let o = env.circe(["validate", f.to_str().unwrap(), "--json"]).run();
    o.code(3);
    let p = &o.json()["files"][0]["problems"][0];
    assert_eq!((&p["line_number"], &p["field"]), (&json!(4), &json!("intent")), "{}", o.show());
    assert!(p["hint"].as_str().unwrap().contains("did you mean `inform`?"), "{}", o.show());
}

/// A message's `created_at` that `send` fills in is to the millisecond at most, as events
/// are (circe writes no time finer).
#[test]
fn a_sent_message_is_stamped_to_the_millisecond() {
    let env = Env::new();
    let o = env
        .circe(["send", "--to", "qa", "--intent", "inform", "--summary", "x", "--json"])
        .agent("engineer")
        .now("")
        .run();
    o.ok();
    let shown = env.circe(["show", o.json()["msg_id"].as_str().unwrap(), "--json"]).run();
    let at = shown.json()["message"]["created_at"].as_str().unwrap().to_string();
    let fraction = at.trim_end_matches('Z').split_once('.').map_or("", |(_, f)| f).to_string();
    assert!(fraction.len() <= 3, "{at}");
}

/// A message about one specific task (`test_results`, ...) names a task that exists: a
/// typo, or a template's TASK-001 left as it was, is refused and writes nothing.
#[test]
fn a_message_about_a_task_that_never_was_is_refused() {
    let env = Env::new();
    env.open_task("T-1");
    let before = env.state();
    let args = ["send", "--to", "coordinator", "--intent", "test_results", "--summary", "ok"];
    let o = env.as_("qa", &[&args[..], &["--task", "NOPE-9"]].concat());
    o.code(5);
    assert!(
        o.stderr.contains("no task `NOPE-9`: a `test_results` is about a task that exists"),
        "{}",
        o.show()
    );
    assert_unchanged(&before, &env.state());
    env.as_("qa", &[&args[..], &["--task", "T-1"]].concat()).ok();
}

/// A task message for a task id that waits already is told apart by what it says: the
/// same message again was delivered already (nothing to do), other work under that id is
/// told to take a new id. Both are exit 4 and write nothing.
#[test]
fn a_task_id_that_waits_already_is_a_retry_only_for_the_same_message() {
    let env = Env::new();
    let send = |summary: &str| {
        env.as_(
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
                summary,
            ],
        )
    };
    send("login crash").ok();
    let before = env.state();
    let again = send("login crash");
    again.code(4);
    assert!(again.stderr.contains("nothing to do"), "{}", again.show());
    let other = send("payments timeout");
    other.code(4);
    assert!(!other.stderr.contains("nothing to do"), "{}", other.show());
    assert!(other.stderr.contains("use a new task id"), "{}", other.show());
    assert!(other.stderr.contains("login crash"), "what waits is named: {}", other.show());
    assert_unchanged(&before, &env.state());
}

/// `send --deadline`: a duration from now or a time. Past it the task is not claimed and
/// `reap` expires it; an unread message is filed into LOGS. A deadline that is neither, or
/// already past, is refused and writes nothing.
#[test]
fn send_deadline_takes_a_duration_or_a_time() {
    let env = Env::new();
    let task = [
        "send",
        "--to",
        "role:engineer",
        "--intent",
        "implement_feature",
        "--task",
        "T-1",
        "--summary",
        "x",
    ];
    env.as_("coordinator", &[&task[..], &["--deadline", "1h"]].concat()).ok();
    assert_eq!(env.record("T-1").deadline.as_deref(), Some("2025-11-21T18:00:00Z"));
    let inform = ["send", "--to", "engineer", "--intent", "inform", "--summary", "y"];
    env.as_("coordinator", &[&inform[..], &["--deadline", "2025-11-21T17:30:00Z"]].concat()).ok();
    let before = env.state();
    for (when, code) in [("soon", 2), ("2025-11-21T16:00:00Z", 3), ("0s", 2)] {
        let o = env.as_("coordinator", &[&inform[..], &["--deadline", when]].concat());
        o.code(code);
        assert!(o.stderr.contains("deadline") && o.stderr.contains("hint:"), "{}", o.show());
    }
    assert_unchanged(&before, &env.state());
    let late = "2025-11-21T18:00:01Z";
    env.at(late, "engineer", &["claim", "T-1"]).code(3);
    let r = env.circe(["reap", "--json"]).now(late).run();
    r.ok();
    assert_eq!(env.record("T-1").status.as_str(), "expired", "{}", r.show());
    assert!(env.ls("AGENTS/engineer/INBOX").is_empty(), "the unread message was not filed");
    // Where it lay, as every message's place is said: `{"box", "file"}`.
    let filed = &r.json()["messages_filed"];
    assert_eq!(filed[0]["box"], "inbox:engineer", "{}", r.show());
    assert!(
        filed[0]["file"]
            .as_str()
            .is_some_and(|f| std::path::Path::new(f).extension().is_some_and(|e| e == "md")),
        "{}",
        r.show()
    );
}

/// On either engine, a send cut off between its delivery and its events, then the same
/// sender's next send (no `--msg-id`: such a send settles every cut-off delivery first): that
/// send logs the cut-off one's event before its own (it holds the sender's hold), so the log
/// follows the sender's numbers and the receiver's stream judges neither stale.
#[test]
fn the_next_send_logs_a_cut_off_send_of_its_sender_before_its_own() {
    let env = Env::new();
    let send = |summary: &str| {
        env.circe([
            "send",
            "--json",
            "--to",
            "engineer",
            "--intent",
            "inform",
            "--summary",
            summary,
        ])
        .agent("coordinator")
    };
    send("first").var("CIRCE_CRASH_AT", "send.logging").run().code(86);
    assert!(env.events().iter().all(|e| e["event"] != "send"));
    let second = send("second").run();
    let second = second.ok().json()["msg_id"].as_str().unwrap().to_string();
    let sends: Vec<serde_json::Value> =
        env.events().into_iter().filter(|e| e["event"] == "send").collect();
    assert_eq!(sends.len(), 2, "{sends:?}");
    assert!(sends[0]["what"].as_str().unwrap_or_default().starts_with("logged late"), "{sends:?}");
    assert_eq!(sends[1]["msg_id"], second.as_str(), "{sends:?}");
    // The receiver's stream hands both on, in order, and skips neither.
    let w = env
        .circe([
            "watch",
            "--cursor",
            "w",
            "--from-start",
            "--kind",
            "send,skip",
            "--once",
            "--json",
        ])
        .agent("engineer")
        .run();
    let seen: Vec<(String, String)> = w
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|e| (e["event"].as_str().unwrap_or_default().into(), e["msg_id"].to_string()))
        .collect();
    let want: Vec<(String, String)> =
        sends.iter().map(|e| ("send".to_string(), e["msg_id"].to_string())).collect();
    assert_eq!(seen, want, "{}", w.show());
    let inbox = env.circe(["inbox", "--json"]).agent("engineer").run();
    assert_eq!(inbox.json()["stale"].as_array().map_or(0, Vec::len), 0, "{}", inbox.show());
    env.circe(["doctor"]).run().ok();
}
