//! circe as the agents who use it meet it: one test per problem found by using it from an
//! agent's shell, each failing on a binary without the fix (`CIRCE_TEST_BIN`).

use serde_json::Value;

use crate::common::{Env, assert_unchanged};

const T: &str = "UI-1";

fn env2() -> Env {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env
}

fn send_task(env: &Env, to: &str, task: &str, priority: &str) {
    env.as_(
        "coordinator",
        &[
            "send",
            "--to",
            to,
            "--intent",
            "implement_feature",
            "--task",
            task,
            "--summary",
            "Build the UI",
            "--priority",
            priority,
        ],
    )
    .ok();
}

/// Problem 1: An agent sees the work it may take without taking it.
#[test]
fn a_look_before_claiming() {
    let env = env2();
    send_task(&env, "all", T, "high");
    let inbox = env.as_("engineer-2", &["inbox"]);
    inbox.ok();
    assert!(inbox.stdout.contains("1 task waiting that you may take"), "{}", inbox.show());
    assert!(inbox.stdout.contains(T) && inbox.stdout.contains("Build the UI"), "{}", inbox.show());
    let j = env.as_("engineer-2", &["inbox", "--json"]).json();
    assert_eq!(j["claimable"]["count"], 1);
    assert_eq!(j["claimable"]["best"][0]["task_id"], T);
    let before = env.state();
    let dry = env.as_("engineer-2", &["claim", "--next", "--dry-run"]);
    dry.ok();
    assert!(dry.stdout.contains(&format!("would claim {T}")), "{}", dry.show());
    assert!(dry.stdout.contains("summary: Build the UI"), "{}", dry.show());
    assert_unchanged(&before, &env.state());
    let c = env.as_("engineer-2", &["claim", "--next", "--json"]).json();
    assert_eq!((c["task_id"].as_str(), c["summary"].as_str()), (Some(T), Some("Build the UI")));
    // The path on this host, when the root is a folder.
    if !crate::common::pg_mode() {
        assert!(c["path"].as_str().is_some_and(|p| std::path::Path::new(p).is_file()), "{c}");
    }
}

/// Problem 2: A task sent to a role stays claimable by every agent of it, however many are added
/// after `init` made an agent named after the role.
#[test]
fn role_addressing() {
    let env = env2();
    send_task(&env, "engineer", "R-1", "normal");
    send_task(&env, "role:engineer", "R-2", "normal");
    send_task(&env, "agent:engineer", "R-3", "normal");
    let o = env.as_("engineer-2", &["claim", "R-3"]);
    o.code(3);
    // claim --next filters the same way: R-1 and R-2, never R-3.
    let mut got: Vec<String> = (0..2)
        .map(|_| {
            env.as_("engineer-2", &["claim", "--next", "--json"]).json()["task_id"].to_string()
        })
        .collect();
    got.sort();
    assert_eq!(got, ["\"R-1\"", "\"R-2\""]);
    env.as_("engineer-2", &["claim", "--next"]).code(6);
    let o = env.as_("engineer", &["claim", "--next", "--json"]);
    assert_eq!(o.json()["task_id"], "R-3");
    // `to: role:engineer` in a file, as the built-in template writes it.
    let t = env.circe(["send", "--template", "implement_feature"]).run();
    assert!(t.stdout.contains("\nto: role:engineer\n"), "{}", t.show());
    let draft: String = t
        .stdout
        .replace("TASK-001", "R-4")
        .lines()
        .map(|l| {
            if l.trim_start_matches("- ").starts_with('<') {
                "filled in\n".to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let f = env.path().join("r4.md");
    std::fs::write(&f, draft).unwrap();
    env.as_("coordinator", &["send", "--file", f.to_str().unwrap()]).ok();
    env.as_("engineer-2", &["claim", "R-4"]).ok();
}

/// Problem 3: Outside a root the hint leads to the team's root first; an agent missing from the root
/// it found is told which root that is.
#[test]
fn outside_a_root_the_hint_offers_the_root_first() {
    let env = Env::bare();
    let o = env.as_("engineer-2", &["inbox"]);
    o.code(2);
    let hint = o.stderr.lines().find(|l| l.starts_with("hint:")).unwrap_or_default();
    let root_at = hint.find("--root").expect("--root in the hint");
    assert!(hint.contains("CIRCE_ROOT"), "{}", o.show());
    assert!(hint.find("init").is_none_or(|i| i > root_at), "{}", o.show());
    let env = Env::new();
    let o = env.as_("engineer-2", &["inbox"]);
    o.code(5);
    assert!(o.stderr.contains("this root is") && o.stderr.contains("--root"), "{}", o.show());
}

/// Problem 4: A key matching several messages says so; the random end of an id finds its message.
#[test]
fn show_by_part_of_an_id() {
    let env = Env::new();
    for (i, t) in ["2025-11-21T17:00:00Z", "2025-11-21T17:00:01Z"].iter().enumerate() {
        env.at(
            t,
            "coordinator",
            &["send", "--to", "engineer", "--intent", "question", "--summary", &format!("q{i}")],
        )
        .ok();
    }
    let o = env.circe(["show", "20251121T1700"]).run();
    o.code(2);
    assert!(o.stderr.contains("matches 2 messages"), "{}", o.show());
    let j = env.as_("engineer", &["inbox", "--json"]).json();
    let id = j["messages"][0]["msg_id"].as_str().unwrap().to_string();
    let tail = id.rsplit('-').next().unwrap();
    let o = env.circe(["show", tail]).run();
    o.ok();
    assert!(o.stdout.contains(&id), "{}", o.show());
}

fn in_progress(env: &Env, task: &str) {
    send_task(env, "all", task, "normal");
    env.as_("engineer", &["claim", task]).ok();
    env.as_("engineer", &["status", task, "in_progress"]).ok();
}

/// Problem 5: Checks are honest: the hint never teaches asserting, an assertion is marked, and a
/// check declared with its command is recorded only by running it.
#[test]
fn honest_checks() {
    let env = Env::new();
    in_progress(&env, T);
    let o = env.as_("engineer", &["status", T, "completed"]);
    o.code(3);
    assert!(!o.stderr.contains("=true"), "the hint teaches the bypass: {}", o.show());
    env.as_("engineer", &["check", T, "tests_passed=true"]).ok();
    let board = env.circe(["tasks"]).run();
    assert!(board.stdout.contains("1/1*"), "{}", board.show());
    let show = env.circe(["show", T]).run();
    let asserted =
        "tests_passed: true  (asserted by engineer at 2025-11-21T17:00:00.000Z, not run)";
    assert!(show.stdout.contains(asserted), "{}", show.show());
    // The text lists the latest events, the JSON all of them.
    for _ in 0..8 {
        env.as_("engineer", &["check", T, "tests_passed=true"]).ok();
    }
    let show = env.circe(["show", T]).run();
    assert!(
        show.stdout.contains("events: 12\n  ... 2 earlier (circe log --all --task"),
        "{}",
        show.show()
    );
    assert!(show.stdout.contains("check UI-1 by engineer tests_passed=true"), "{}", show.show());
    assert_eq!(
        env.circe(["show", T, "--json"]).run().json()["events"].as_array().unwrap().len(),
        12
    );
    // Declared in circe.yaml: only its command records it.
    let cfg = env.circe(["config"]).run().stdout + "checks:\n  tests_passed: {run: \"true\"}\n";
    let file = env.path().join("new.yaml");
    std::fs::write(&file, cfg).unwrap();
    env.circe(["config", "--set", file.to_str().unwrap()]).run().ok();
    in_progress(&env, "UI-2");
    // A completion refused for it hints the declared command's run, which then works.
    let refused = env.as_("engineer", &["status", "UI-2", "completed"]);
    refused.code(3);
    let run = "circe --agent engineer check UI-2 --run tests_passed (circe.yaml declares";
    assert!(refused.stderr.contains(run), "{}", refused.show());
    env.as_("engineer", &["check", "UI-2", "tests_passed=true"]).code(3);
    env.as_("engineer", &["check", "UI-2", "--run", "tests_passed", "--", "true"]).code(3);
    let run = env.as_("engineer", &["check", "UI-2", "--run", "tests_passed", "--json"]);
    run.ok();
    assert_eq!(run.json()["command"], serde_json::json!(["sh", "-c", "true"]));
    let ran = "tests_passed: true  (run by engineer at 2025-11-21T17:00:00.000Z)";
    assert!(env.circe(["show", "UI-2"]).run().stdout.contains(ran));
    // A coordinator may assert it, with a reason that is logged.
    in_progress(&env, "UI-3");
    env.as_("coordinator", &["check", "UI-3", "tests_passed=true"]).code(3);
    // A reason that says nothing is no reason (nor for a forced release).
    let before = env.state();
    let blank = env.as_("coordinator", &["check", "UI-3", "tests_passed=true", "--reason", "  "]);
    assert_eq!(blank.code, 3, "{}", blank.show());
    assert!(blank.stderr.contains("--reason is blank"), "{}", blank.show());
    env.as_("coordinator", &["release", "UI-3", "--force", "--reason", ""]).code(3);
    crate::common::assert_unchanged(&before, &env.state());
    env.as_("coordinator", &["check", "UI-3", "tests_passed=true", "--reason", "ran by hand"]).ok();
    let ev: Vec<Value> = env.events();
    let last = ev.iter().rev().find(|e| e["event"] == "check").unwrap();
    assert_eq!((&last["how"], &last["reason"]), (&"asserted".into(), &"ran by hand".into()));
}

/// Problem 6: A mistyped check name is refused with the task's checks.
#[test]
fn a_mistyped_check_is_refused() {
    let env = Env::new();
    in_progress(&env, T);
    let before = env.state();
    let o = env.as_("engineer", &["check", T, "--run", "test_passed", "--", "true"]);
    o.code(3);
    assert!(o.stderr.contains("did you mean `tests_passed`"), "{}", o.show());
    assert_unchanged(&before, &env.state());
}

/// Problem 7: One JSON vocabulary: `task_id` for the id, objects at the top, flags named.
#[test]
fn one_json_vocabulary() {
    let env = Env::new();
    in_progress(&env, T);
    for args in [
        &["claim", T][..],
        &["status", T, "in_progress"],
        &["heartbeat", T],
        &["check", T, "tests_passed=true"],
    ] {
        let j = env.as_("engineer", &[&["--json"][..], args].concat()).json();
        assert_eq!(j["task_id"], T, "{args:?}: {j}");
    }
    assert!(env.circe(["agent", "list", "--json"]).run().json().is_object());
    let reg = env.circe(["registry", "--json"]).run().json();
    assert!(reg["intents"]["question"]["from"].is_array(), "{}", reg["intents"]["question"]);
    let tasks = env.circe(["tasks", "--json"]).run().json();
    assert_eq!(tasks["tasks"][0]["task_id"], T);
    let show = env.circe(["show", T, "--json"]).run().json();
    assert!(show["task"].is_object() && show["task_id"] == T);
    assert!(show["events"].as_array().unwrap().iter().all(|e| e["task_id"] == T));
    let bad = env.circe(["--json", "tasks", "--colour", "red"]).run();
    bad.code(2);
    assert!(
        bad.json()["error"]["message"].as_str().unwrap().contains("--colour"),
        "{}",
        bad.show()
    );
}

/// Problem 8: Error texts say what happened, in the words the commands take.
#[test]
fn texts_say_what_happened() {
    let env = Env::new();
    in_progress(&env, T);
    env.as_("engineer", &["check", T, "--run", "tests_passed", "--", "true"]).ok();
    env.as_("engineer", &["status", T, "completed"]).ok();
    let hb = env.as_("engineer", &["heartbeat", T]);
    hb.code(3);
    assert!(!hb.stderr.contains("held by engineer, not engineer"), "{}", hb.show());
    let back = env.as_("engineer", &["status", T, "in-progress"]);
    back.code(3);
    assert!(!back.stderr.contains("cannot start"), "{}", back.show());
    assert!(back.stderr.contains("in_progress"), "{}", back.show());
    in_progress(&env, "F-1");
    env.as_("engineer", &["status", "F-1", "failed"]).ok();
    let r = env.as_("coordinator", &["release", "F-1", "--force"]);
    r.code(3);
    assert!(!r.stderr.contains("held by"), "{}", r.show());
    let reach =
        env.as_("engineer", &["send", "--to", "all", "--intent", "inform", "--summary", "x"]);
    assert!(!reach.stderr.contains("circe agents "), "{}", reach.show());
}

/// Problem 9: Asking for the status a task has is no error; `help status` tells the path.
#[test]
fn moves_are_idempotent() {
    let env = Env::new();
    in_progress(&env, T);
    let again = env.as_("engineer", &["status", T, "in_progress"]);
    again.ok();
    assert!(again.stdout.contains("already in_progress"), "{}", again.show());
    assert_eq!(
        env.as_("engineer", &["status", T, "in_progress", "--json"]).json()["already"],
        true
    );
    let h = env.circe(["help", "status"]).run();
    assert!(
        h.stdout.contains("needs\n`in_progress` first")
            || h.stdout.contains("needs `in_progress` first"),
        "{}",
        h.show()
    );
}

/// Problem 10: Priority is shown and kept at a handoff; a handoff says which checks it reset.
#[test]
fn priority_shown_and_kept_and_resets_said() {
    let env = Env::new();
    send_task(&env, "all", T, "high");
    let board = env.circe(["tasks"]).run();
    assert!(board.stdout.contains("PRI") && board.stdout.contains("high"), "{}", board.show());
    env.as_("engineer", &["claim", T]).ok();
    env.as_("engineer", &["status", T, "in_progress"]).ok();
    env.as_("engineer", &["check", T, "--run", "tests_passed", "--", "true"]).ok();
    let h = env.as_(
        "engineer",
        &["send", "--to", "role:qa", "--intent", "test", "--task", T, "--summary", "test it"],
    );
    h.ok();
    assert!(h.stdout.contains("checks reset to false: tests_passed"), "{}", h.show());
    assert_eq!(env.record(T).priority, "high");
    env.as_("qa", &["claim", T]).ok();
    let inbox = env.as_("qa", &["inbox"]);
    assert!(inbox.stdout.contains("PRI") && inbox.stdout.contains("test it"), "{}", inbox.show());
}

/// Problem 11: An answer joins its question's task; open questions are listed until answered.
#[test]
fn threads_and_open_questions() {
    let env = Env::new();
    in_progress(&env, T);
    let q = env.as_(
        "engineer",
        &[
            "send",
            "--to",
            "coordinator",
            "--intent",
            "question",
            "--task",
            T,
            "--summary",
            "which DB?",
            "--json",
        ],
    );
    let qid = q.json()["msg_id"].as_str().unwrap().to_string();
    let open = env.as_("coordinator", &["questions", "--json"]).json();
    assert_eq!(open["questions"][0]["msg_id"], qid.as_str());
    assert_eq!(open["questions"][0]["direction"], "to_me");
    let inbox = env.as_("coordinator", &["inbox"]);
    assert!(inbox.stdout.contains(&qid) && inbox.stdout.contains("which DB?"), "{}", inbox.show());
    // An answer to an id no message has is refused (a mistyped id would answer nothing).
    let typo = format!("{}{}", &qid[..qid.len() - 1], if qid.ends_with('z') { "y" } else { "z" });
    // The coordinator answers message `id` with `more` arguments.
    let answer = |id: &str, more: &[&str]| {
        let args = ["send", "--to", "engineer", "--intent", "answer", "--in-reply-to", id];
        env.as_("coordinator", &[&args[..], more].concat())
    };
    let before = env.state();
    let bad = answer(&typo, &["--summary", "x"]);
    bad.code(5);
    assert!(
        bad.stderr.contains("no message has that id")
            && bad.stderr.contains("circe --agent coordinator questions"),
        "{}",
        bad.show()
    );
    crate::common::assert_unchanged(&before, &env.state());
    let a = answer(&qid, &["--summary", "postgres", "--json"]);
    a.ok();
    assert_eq!(a.json()["task_id"], T);
    let inbox = env.as_("engineer", &["inbox"]);
    assert!(inbox.stdout.contains("ANSWERS") && inbox.stdout.contains(&qid), "{}", inbox.show());
    let show = env.circe(["show", T]).run();
    assert!(show.stdout.contains("coordinator answer"), "{}", show.show());
    let open = env.as_("coordinator", &["questions", "--json"]).json();
    assert_eq!(open["questions"], serde_json::json!([]));
}

/// Problem 12: Onboarding: init says what it made, help leads somewhere an installed binary has.
#[test]
fn onboarding() {
    let env = Env::bare();
    let o = env.circe(["init"]).run();
    o.ok();
    for a in ["scribe (scribe)", "eagle (eagle)", "rooster (rooster)", "prime"] {
        assert!(o.stdout.contains(a), "{a}: {}", o.show());
    }
    let h = env.circe(["help", "claim"]).run();
    assert!(h.stdout.contains("Examples:"), "{}", h.show());
    let p = env.as_("engineer", &["prime"]);
    p.ok();
    assert!(p.stdout.contains("You are engineer (role engineer)"), "{}", p.show());
    // In JSON, "any role" is said as registry --json says it: `to_any`, `to` listing roles.
    let j = env.as_("engineer", &["prime", "--json"]).json();
    let sends = j["may_send"].as_array().unwrap();
    assert!(sends.iter().any(|m| m["to_any"] == true), "{j}");
    assert!(sends.iter().all(|m| !m["to"].as_array().unwrap().contains(&"any".into())), "{j}");
    // A coordinator is told its own part: open tasks, follow them, put parked ones back.
    assert_eq!(j["coordinating"], serde_json::json!([]), "{j}");
    let coordinator = env.as_("coordinator", &["prime"]);
    for part in
        ["Coordinating:", "--intent implement_feature --task T-1", "watch", "release --force"]
    {
        assert!(coordinator.stdout.contains(part), "{part}: {}", coordinator.show());
    }
}

/// Problem 13: Nothing to claim is exit 6 and not an error.
#[test]
fn nothing_to_claim_is_not_an_error() {
    let env = Env::new();
    let o = env.as_("engineer", &["claim", "--next"]);
    o.code(6);
    assert!(!o.stderr.contains("error"), "{}", o.show());
    assert!(o.stdout.contains("nothing to claim"), "{}", o.show());
}

/// Problem 14: Standard input as a body; "did you mean" for agents, roles and intents.
#[test]
fn typos_get_a_did_you_mean() {
    let env = Env::new();
    let o = env
        .circe(["send", "--to", "qa", "--intent", "inform", "--body-file", "-", "--json"])
        .agent("engineer")
        .stdin(b"from stdin\n")
        .run();
    o.ok();
    let file = o.json()["delivered"][0]["file"].as_str().unwrap().to_string();
    assert!(env.read(&format!("AGENTS/qa/INBOX/{file}")).contains("from stdin"));
    let cases: [(&str, &[&str], &str); 4] = [
        (
            "engineer",
            &["send", "--to", "enginer", "--intent", "inform"],
            "did you mean `engineer`?",
        ),
        ("enginer", &["inbox"], "did you mean `engineer`?"),
        ("Engineer", &["inbox"], "did you mean `engineer`?"),
        ("engineer", &["send", "--to", "qa", "--intent", "escalation"], "did you mean `escalate`?"),
    ];
    for (agent, args, want) in cases {
        let o = env.as_(agent, args);
        assert!(o.code != 0 && o.stderr.contains(want), "{want}: {}", o.show());
    }
}

/// README's "Use it" block runs as written, line by line, in an empty folder (its `cargo
/// test` stands for the project's tests): every command exits 0.
#[test]
fn readme_use_it_runs_as_written() {
    let readme = include_str!("../../README.md");
    let block = readme
        .split_once("## Use it\n\n```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(b, _)| b)
        .expect("README has a \"Use it\" block");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.md"), "Tokens expire after an hour.\n").unwrap();
    let mut line = String::new();
    let mut ran = 0;
    for raw in block.lines() {
        let code = raw.split(" # ").next().unwrap_or("").trim_end();
        if let Some(more) = code.strip_suffix('\\') {
            line.push_str(more);
            continue;
        }
        line.push_str(code);
        let cmd = std::mem::take(&mut line).replace("-- cargo test", "-- true");
        let Some(args) = cmd.trim().strip_prefix("circe ") else { continue };
        // The shell reads the quotes; `$0` is the binary under test.
        let o = std::process::Command::new("sh")
            .args(["-c", &format!("\"$0\" {args}")])
            .arg(crate::common::exe())
            .current_dir(dir.path())
            .env_remove("CIRCE_ROOT")
            .env_remove("CIRCE_AGENT")
            .env_remove("CIRCE_NOW")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "README: `{}`: {}",
            cmd.trim(),
            String::from_utf8_lossy(&o.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 15, "README's block ran {ran} commands");
}

/// Problem 15: The README installs with the lock file, says where the binary lands, and the demo
/// ends with what to run next.
#[test]
fn readme_and_demo_lead_on() {
    let readme = include_str!("../../README.md");
    assert!(readme.contains("cargo install --locked --path ."), "README: install with --locked");
    assert!(
        readme.contains("target/x86_64-unknown-linux-gnu/release/circe"),
        "README: where the binary is"
    );
    assert!(
        !readme.contains("alias circe='cargo run"),
        "README: an alias that only works in the source tree"
    );
    assert!(
        readme.contains("AGENTS.md") && readme.contains("<your-name> prime"),
        "README: the AGENTS.md snippet"
    );
    let steps = include_str!("../../fixtures/reference-flow/steps");
    let last = steps.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(last.starts_with("## Next:") && last.contains("prime"), "{last}");
}
