//! The streams: `watch` with cursors and hooks, `wait`, `log`, `cursors`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Env, exe};

fn spawn(env: &Env, agent: Option<&str>, args: &[&str]) -> Child {
    let mut c = Command::new(exe());
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.path())
        .current_dir(env.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(a) = agent {
        c.env("CIRCE_AGENT", a);
    }
    c.spawn().unwrap()
}

/// Read JSON lines from a child until `n` came (or 20 s passed).
fn lines(child: &mut Child, n: usize) -> Vec<Value> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => got.push(serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))),
            Err(_) => break,
        }
    }
    got
}

fn inform(env: &Env, from: &str, to: &str, text: &str) {
    env.as_(from, &["send", "--to", to, "--intent", "inform", "--summary", text]).ok();
}

fn ids(v: &[Value]) -> Vec<u64> {
    v.iter().map(|e| e["id"].as_u64().unwrap()).collect()
}

/// A watcher prints each event as it happens, one JSON line with its id; --agent keeps what
/// concerns that agent (its inbox, tasks it may take), not others'.
#[test]
fn watch_follows_and_filters() {
    let env = Env::new();
    let mut all = spawn(&env, None, &["watch", "--json"]);
    let mut qa = spawn(&env, Some("qa"), &["watch", "--json"]);
    std::thread::sleep(Duration::from_millis(300));
    inform(&env, "engineer", "qa", "for qa");
    inform(&env, "qa", "scribe", "for scribe");
    inform(&env, "engineer", "scribe", "not for qa");
    env.open_task("W-1"); // implement_feature: not a task qa may take
    let got = lines(&mut all, 4);
    let mine = lines(&mut qa, 2);
    for mut c in [all, qa] {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert_eq!(ids(&got), [1, 2, 3, 4]);
    assert_eq!(got[3]["event"], "open");
    assert_eq!(ids(&mine), [1, 2], "what qa received and what qa did, nothing else");
    assert_eq!(mine[0]["files"][0]["box"], "inbox:qa");
}

/// A current log removed by hand takes its ids with it, but not the cursors that passed
/// them: the next event takes the id after the newest a cursor passed, so that consumer
/// hands it on (it took id 1 again, and the consumer passed over every event up to its
/// cursor). A cursor past the newest event of a log that goes on is doctor's to report.
#[test]
fn a_removed_log_gives_no_id_a_cursor_passed() {
    local_only!("removes the local event log by hand");
    let env = Env::new();
    for i in 0..3 {
        inform(&env, "engineer", "qa", &format!("m{i}"));
    }
    let o =
        env.circe(["watch", "--all", "--from-start", "--cursor", "c1", "--once", "--json"]).run();
    assert_eq!(o.stdout.lines().count(), 3, "{}", o.show());
    std::fs::remove_file(env.root().join("LOGS/events.jsonl")).unwrap();
    env.circe(["doctor"]).run().ok();
    inform(&env, "engineer", "qa", "after");
    let o = env.circe(["watch", "--all", "--cursor", "c1", "--once", "--json"]).run();
    o.ok();
    let got: Vec<Value> = o.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(ids(&got), vec![4], "{}", o.show());
    // A cursor edited past the newest event of a log that goes on: reported, with the way out.
    let p = env.root().join("cursors/events/c1");
    let text = std::fs::read_to_string(&p).unwrap().replace("\"after\":4", "\"after\":50");
    std::fs::write(&p, text).unwrap();
    let d = env.circe(["doctor"]).run();
    d.code(1);
    assert!(
        d.stderr.contains("cursor c1 has passed event 50, but the log's newest is 4")
            && d.stderr.contains("circe cursors --remove c1"),
        "{}",
        d.show()
    );
    // Its watcher says so on stderr when it starts, rather than hearing nothing in silence.
    let w = env.circe(["watch", "--all", "--cursor", "c1", "--once", "--json"]).run();
    w.ok();
    assert!(
        w.stderr.contains("warning: cursor c1 has passed event 50, but the log's newest is 4")
            && w.stderr.contains("circe cursors --remove c1")
            && w.stderr.contains("circe doctor"),
        "{}",
        w.show()
    );
    assert!(w.stdout.is_empty(), "{}", w.show());
}

/// A line of a format newer than this circe reads, appended by hand: `log` and `watch` refuse
/// it (exit 3) naming the event's id and the file; `doctor` reports it as a violation, with
/// its line, instead of failing (also with a cursor that has to read past it).
#[test]
fn a_line_of_a_newer_format_is_named_where_it_lies() {
    local_only!("appends a line to the local event log by hand");
    let env = Env::new();
    inform(&env, "engineer", "qa", "m0");
    env.circe(["watch", "--all", "--from-start", "--cursor", "c1", "--once"]).run().ok();
    let log = env.root().join("LOGS/events.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(
        "{\"id\":2,\"v\":99,\"ts\":\"2026-11-29T16:18:27Z\",\"event\":\"x\",\"agent\":\"x\"}\n",
    );
    std::fs::write(&log, text).unwrap();
    for args in [&["log", "--all"][..], &["watch", "--all", "--cursor", "c1", "--once"][..]] {
        let o = env.circe(args).run();
        o.code(3);
        assert!(
            o.stderr.contains("format 99 (event 2)") && o.stderr.contains("LOGS/events.jsonl"),
            "{}",
            o.show()
        );
    }
    let d = env.circe(["doctor", "--json"]).run();
    d.code(1);
    let said = d.json()["violations"].to_string();
    assert!(said.contains("LOGS/events.jsonl line 2 (event 2) is of format 99"), "{}", d.show());
    assert!(said.contains("cursor c1 cannot go on"), "{}", d.show());
}

/// A current log that is no regular file, moved aside by `doctor --repair`: the newest id a
/// cursor passed is kept as the floor, so ids go on after it also once that cursor is gone.
#[test]
fn a_log_moved_aside_keeps_the_cursors_floor_after_the_cursor_goes() {
    local_only!("puts a FIFO in place of the local event log");
    let env = Env::new();
    for i in 0..3 {
        inform(&env, "engineer", "qa", &format!("m{i}"));
    }
    env.circe(["watch", "--all", "--from-start", "--cursor", "c1", "--once"]).run().ok();
    let log = env.root().join("LOGS/events.jsonl");
    std::fs::remove_file(&log).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&log).status().unwrap();
    assert!(made.success());
    env.circe(["doctor", "--repair"]).run();
    env.circe(["cursors", "--remove", "c1"]).run().ok();
    inform(&env, "engineer", "qa", "after");
    let o = env.circe(["log", "--all", "--json"]).run();
    o.ok();
    let got: Vec<Value> = o.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(ids(&got), vec![4], "{}", o.show());
}

/// Killed and restarted with the same cursor, a watcher goes on after the last event it
/// handed on: nothing skipped, nothing repeated.
#[test]
fn a_cursor_survives_a_kill() {
    let env = Env::new();
    for i in 0..3 {
        inform(&env, "engineer", "qa", &format!("m{i}"));
    }
    let o =
        env.circe(["watch", "--all", "--from-start", "--cursor", "c1", "--once", "--json"]).run();
    o.ok();
    assert_eq!(o.stdout.lines().count(), 3);
    inform(&env, "engineer", "qa", "m3");
    let mut w = spawn(&env, None, &["watch", "--all", "--cursor", "c1", "--json"]);
    let first = lines(&mut w, 1);
    // Once the cursor says 4 was handed on, kill it (a kill between printing and saving
    // repeats the one event in flight: the torture suite counts those).
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.circe(["cursors", "--json"]).run().json()["cursors"][0]["after"] != 4
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    w.kill().unwrap(); // SIGKILL
    let _ = w.wait();
    inform(&env, "engineer", "qa", "m4");
    let rest = env.circe(["watch", "--all", "--cursor", "c1", "--once", "--json"]).run();
    rest.ok();
    let rest: Vec<Value> = rest.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!((ids(&first), ids(&rest)), (vec![4], vec![5]));
    let c = env.circe(["cursors", "--json"]).run();
    c.ok();
    assert_eq!(c.json()["cursors"][0]["after"], 5);
    // One consumer per cursor.
    let mut held = spawn(&env, None, &["watch", "--all", "--cursor", "c1"]);
    std::thread::sleep(Duration::from_millis(300));
    env.circe(["watch", "--all", "--cursor", "c1", "--once"]).run().code(4);
    // Its JSON error is one line, as every line a stream prints is one object.
    let o = env.circe(["watch", "--all", "--cursor", "c1", "--once", "--json"]).run();
    o.code(4);
    assert_eq!(o.stdout.lines().count(), 1, "{}", o.show());
    let e: Value = serde_json::from_str(o.stdout.trim()).unwrap();
    assert_eq!(e["error"]["exit_code"], 4);
    // So is a command line refused before the stream starts (a stream's only); another
    // command's stays a document.
    for (args, lines) in [
        (&["--json", "log", "--bogus"][..], 1),
        (&["--json", "chat", "watch", "--bogus"], 1),
        (&["--json", "tasks", "--bogus"], 11),
    ] {
        let o = env.circe(args).run();
        o.code(2);
        assert_eq!(o.stdout.lines().count(), lines, "{}", o.show());
    }
    let _ = held.kill();
    let _ = held.wait();
}

/// A new cursor keeps its starting place from its first run: a consumer that stopped before
/// any event came resumes there, and sees what came while it was away.
#[test]
fn a_new_cursor_keeps_its_place_before_its_first_event() {
    let env = Env::new();
    inform(&env, "engineer", "qa", "before");
    let first = env.circe(["watch", "--all", "--cursor", "fresh", "--once", "--json"]).run();
    first.ok();
    assert_eq!(first.stdout.lines().count(), 0, "{}", first.show());
    inform(&env, "engineer", "qa", "while away");
    let next = env.circe(["watch", "--all", "--cursor", "fresh", "--once", "--json"]).run();
    next.ok();
    let seen: Vec<Value> = next.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(ids(&seen), vec![2], "{}", next.show());
}

/// A message to a role lands in every member's INBOX: a stream for one of them (`wait`,
/// a `watch` hook) is given that member's own copy, not the first member's.
#[test]
fn a_stream_for_an_agent_is_given_its_own_copy() {
    let env = Env::new();
    env.as_("coordinator", &["agent", "add", "qa-2", "--role", "qa"]).ok();
    let w = spawn(&env, Some("qa-2"), &["wait", "--for", "inbox", "--new", "--json"]);
    std::thread::sleep(Duration::from_millis(400));
    inform(&env, "engineer", "role:qa", "for both");
    let met = w.wait_with_output().unwrap();
    let met: Value = serde_json::from_slice(&met.stdout).expect("wait's JSON");
    assert_eq!(met["box"], "inbox:qa-2", "{met}");
    let out = env.path().join("hook.txt");
    let hook = format!("echo \"$CIRCE_BOX $CIRCE_FILE\" >> {}", out.display());
    let o = env
        .circe(["watch", "--from-start", "--once", "--kind", "send", "--exec", &hook])
        .agent("qa-2")
        .run();
    o.ok();
    let said = std::fs::read_to_string(&out).unwrap_or_default();
    // A database root has no path to give: the file's name.
    let path_ok = crate::common::pg_mode() || said.contains("/qa-2/");
    assert!(said.starts_with("inbox:qa-2 ") && path_ok, "{said}");
}

/// A hook acts as the agent the stream is for: a `circe` command it runs finds the root
/// (`CIRCE_ROOT`) and acts as that agent (`CIRCE_AGENT`), never as whoever caused the event
/// (`CIRCE_EVENT_AGENT`).
#[test]
fn a_hook_acts_as_the_agent_the_stream_is_for() {
    let env = Env::new();
    inform(&env, "engineer", "qa", "hello");
    let out = env.path().join("hook.txt");
    let hook = format!(
        "echo \"$CIRCE_AGENT $CIRCE_EVENT_AGENT\" > {o}; cd /; {exe} prime --json > {o}.prime",
        o = out.display(),
        exe = exe().display()
    );
    let o = env
        .circe(["watch", "--from-start", "--once", "--kind", "send", "--exec", &hook])
        .agent("qa")
        .run();
    o.ok();
    assert_eq!(std::fs::read_to_string(&out).unwrap_or_default(), "qa engineer\n");
    let prime = std::fs::read_to_string(out.with_extension("txt.prime")).unwrap_or_default();
    let prime: Value = serde_json::from_str(&prime).expect("prime's JSON from inside the hook");
    assert_eq!(prime["agent"], "qa", "{prime}");
}

/// `wait --exec` prints what it waited for once the hook exited 0, as `wait` does.
#[test]
fn wait_with_a_hook_still_says_what_it_waited_for() {
    let env = Env::new();
    inform(&env, "engineer", "qa", "hello");
    let o = env.circe(["wait", "--for", "inbox", "--exec", "true"]).agent("qa").run();
    o.ok();
    assert!(o.stdout.starts_with("already: a message is in your INBOX: inbox:qa/"), "{}", o.show());
}

/// A new `--from-start` cursor starts at the oldest event kept: once the log's first segment
/// is gone (archived), one stopped before its first event does not need an event the log no
/// longer has (doctor stays clean).
#[test]
fn a_new_from_start_cursor_starts_at_the_oldest_event_kept() {
    local_only!("moves a rotated segment of the local event log by hand");
    let env = Env::new();
    for i in 0..3 {
        inform(&env, "engineer", "qa", &format!("a{i}"));
    }
    let root = circe::engine::RootSpec::Path(env.root());
    let ws = circe::workspace::Workspace::open(&root).unwrap();
    assert!(ws.engine.rotate_events().unwrap().is_some());
    inform(&env, "engineer", "qa", "kept");
    // The rotated segment leaves the log, as the archive would take it.
    let logs = env.root().join("LOGS");
    let away = env.path().join("away");
    std::fs::create_dir(&away).unwrap();
    for f in std::fs::read_dir(&logs).unwrap().map(|f| f.unwrap().path()) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("events-") {
            std::fs::rename(&f, away.join(name)).unwrap();
        }
    }
    // A consumer whose hook keeps failing never hands its first event on.
    let mut w = spawn(
        &env,
        None,
        &["watch", "--all", "--from-start", "--cursor", "fs", "--exec", "exit 1"],
    );
    std::thread::sleep(Duration::from_millis(700));
    let _ = w.kill();
    let _ = w.wait();
    let c = env.circe(["cursors", "--json"]).run();
    assert_eq!(c.json()["cursors"][0]["after"], 3, "{}", c.show());
    env.circe(["doctor"]).run().ok();
}

/// A watcher following through a rotation of the log misses nothing.
#[test]
fn rotation_under_a_follower() {
    local_only!("rotates the local event log's file (the database keeps one table)");
    let env = Env::new();
    let mut w = spawn(&env, None, &["watch", "--all", "--json", "--cursor", "r"]);
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..3 {
        inform(&env, "engineer", "qa", &format!("a{i}"));
    }
    let root = circe::engine::RootSpec::Path(env.root());
    let ws = circe::workspace::Workspace::open(&root).unwrap();
    assert!(ws.engine.rotate_events().unwrap().is_some());
    for i in 0..3 {
        inform(&env, "engineer", "qa", &format!("b{i}"));
    }
    let got = lines(&mut w, 6);
    let _ = w.kill();
    let _ = w.wait();
    assert_eq!(ids(&got), [1, 2, 3, 4, 5, 6]);
}

/// `--exec`: the event reaches the hook as data only; a failing hook is retried, then set
/// aside with --max-attempts, and the stream goes on.
#[test]
fn exec_hooks_retry_and_set_aside() {
    let env = Env::new();
    let hostile = "$(touch pwned); `touch pwned2`";
    inform(&env, "engineer", "qa", hostile);
    inform(&env, "engineer", "qa", "second");
    let seen = env.path().join("seen");
    let hook = format!(
        "cat >> {0}; echo \"$CIRCE_EVENT_ID $CIRCE_EVENT_KIND $CIRCE_BOX\" >> {0}.env",
        seen.display()
    );
    env.circe(["watch", "--all", "--from-start", "--once", "--cursor", "h", "--exec", &hook])
        .run()
        .ok();
    let env_lines = std::fs::read_to_string(seen.with_extension("env")).unwrap();
    assert_eq!(env_lines, "1 send inbox:qa\n2 send inbox:qa\n");
    assert!(!env.path().join("pwned").exists() && !env.path().join("pwned2").exists());
    let stdin_json = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(stdin_json.lines().count(), 2, "each event as one JSON line on stdin");
    // A hook that fails twice, then works: retried, and the cursor moves once it worked.
    let count = env.path().join("count");
    let flaky = format!(
        "n=$(cat {0} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {0}; [ $n -ge 3 ]",
        count.display()
    );
    inform(&env, "engineer", "qa", "third");
    let o = env.circe(["watch", "--all", "--once", "--cursor", "h", "--exec", &flaky]).run();
    o.ok();
    assert_eq!(o.stderr.matches("(exit status 1, attempt").count(), 2, "{}", o.show());
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "3");
    // Always failing, at most 2 runs: set aside, logged, and the next event still handled.
    inform(&env, "engineer", "qa", "fourth");
    inform(&env, "engineer", "qa", "fifth");
    let o = env
        .circe([
            "watch",
            "--all",
            "--once",
            "--cursor",
            "h",
            "--exec",
            "exit 1",
            "--max-attempts",
            "2",
        ])
        .run();
    o.ok();
    assert_eq!(
        o.stderr.matches("set aside after 2 failed hook runs (the last: exit status 1)").count(),
        2,
        "{}",
        o.show()
    );
    let c = env.circe(["cursors", "--json"]).run();
    assert_eq!(c.json()["cursors"][0]["dead_letters"], 2);
    assert!(env.events().iter().any(|e| e["event"] == "dead_letter"));
}

/// `wait`: what holds already answers at once; an event answers a waiter; many waiters at
/// once; a timeout is exit 7; what can never happen is exit 3 at once.
#[test]
fn wait_for_things() {
    let env = Env::new();
    env.circe(["wait", "--for", "inbox", "--timeout", "300ms"]).agent("qa").run().code(7);
    let waiters: Vec<Child> = (0..6)
        .map(|_| spawn(&env, Some("qa"), &["wait", "--for", "inbox", "--json", "--timeout", "20s"]))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    inform(&env, "engineer", "qa", "wake up");
    for w in waiters {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["event"]["event"], "send");
    }
    let o = env.circe(["wait", "--for", "inbox", "--json"]).agent("qa").run();
    o.ok();
    assert_eq!(o.json()["already"], true);
    // Every key is there, null when it does not apply.
    assert!(o.json()["claimed"].is_null() && o.json().get("claimed").is_some(), "{}", o.show());
    // --claim only goes with claimable.
    let o = env.circe(["wait", "--for", "inbox", "--claim"]).agent("qa").run();
    o.code(2);
    assert!(o.stderr.contains("--claim goes with --for claimable"), "{}", o.show());
    // A failing hook: exit 1 with an error that says so (and a JSON error, not the answer).
    let o = env.circe(["wait", "--for", "inbox", "--json", "--exec", "exit 3"]).agent("qa").run();
    o.code(1);
    let message = o.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("hook failed (exit status 3)"), "{}", o.show());
    env.circe(["wait", "--for", "inbox", "--new", "--timeout", "300ms"]).agent("qa").run().code(7);
    // A task: claimable, claimed by the waiter itself, then a status that cannot come.
    env.open_task("T-1");
    let o = env.circe(["wait", "--for", "claimable", "--claim", "--json"]).agent("engineer").run();
    o.ok();
    assert_eq!(o.json()["claimed"]["task_id"], "T-1");
    // The claim as `circe claim --json` prints one: its message's place is {box, file}.
    assert_eq!(o.json()["claimed"]["message"]["box"], "inbox:engineer", "{}", o.show());
    // Said for people as `circe claim` says it: summary, message, what to run next.
    env.open_task("T-2");
    let o = env.circe(["wait", "--for", "claimable", "--claim"]).agent("engineer").run();
    assert!(o.ok().stdout.starts_with("claimed T-2 (epoch 1, lease until "), "{}", o.show());
    assert!(
        o.stdout.contains("  summary: do it\n  message: AGENTS/engineer/INBOX/"),
        "{}",
        o.show()
    );
    assert!(
        o.stdout.contains("  next: circe --agent engineer status T-2 in_progress"),
        "{}",
        o.show()
    );
    env.as_("engineer", &["status", "T-1", "in_progress"]).ok();
    env.as_("engineer", &["status", "T-1", "failed"]).ok();
    let o = env.circe(["wait", "--for", "status:T-1=completed"]).agent("engineer").run();
    o.code(3);
    assert!(o.stderr.contains("will never be completed"), "{}", o.show());
    // Failed already: it holds at once, and a new failure will never come.
    let o = env.circe(["wait", "--for", "status:T-1=failed"]).agent("engineer").run();
    o.ok();
    assert_eq!(o.stdout, "already: T-1 is failed\n", "{}", o.show());
    let args = ["wait", "--for", "status:T-1=failed", "--new", "--timeout", "5s"];
    let o = env.circe(args).agent("engineer").run();
    o.code(3);
    assert!(o.stderr.contains("a new one will never come"), "{}", o.show());
}

/// `wait --for status:TASK=S` of a task not opened yet: exit 5 at once (a typo would wait
/// for ever), saying that `--new` waits for it; with `--new` it waits for the task to be
/// opened and reach S.
#[test]
fn wait_for_the_status_of_a_task_not_opened_yet() {
    let env = Env::new();
    let o = env.circe(["wait", "--for", "status:T-9=claimed"]).agent("engineer").run();
    o.code(5);
    assert!(
        o.stderr.contains("with --new the wait waits for a task T-9 opened later"),
        "{}",
        o.show()
    );
    let args = ["wait", "--for", "status:T-9=claimed", "--new", "--timeout", "20s", "--json"];
    let mut waiter = spawn(&env, Some("engineer"), &args);
    env.open_task("T-9");
    // Claimed again and again until the waiter (subscribed some time after its start) sees
    // one: a claim it was not yet subscribed to is history, and --new waits for a new one.
    let until = Instant::now() + Duration::from_secs(20);
    let status = loop {
        env.as_("engineer", &["claim", "T-9"]).ok();
        std::thread::sleep(Duration::from_millis(200));
        if let Some(s) = waiter.try_wait().unwrap() {
            break s;
        }
        env.as_("engineer", &["release", "T-9"]).ok();
        assert!(Instant::now() < until, "the waiter never saw T-9 claimed");
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut waiter.stdout.take().unwrap(), &mut out).unwrap();
    assert!(status.success(), "{out}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["task_id"], "T-9", "{out}");
}

/// `wait --for reply:ID`: waits for an answer to a message that was sent, holds once one
/// came, and refuses an id no message has (nothing could answer it).
#[test]
fn wait_for_a_reply() {
    let env = Env::new();
    let q = env.as_(
        "qa",
        &["send", "--to", "engineer", "--intent", "inform", "--summary", "q?", "--json"],
    );
    let id = q.json()["msg_id"].as_str().unwrap().to_string();
    let reply = format!("reply:{id}");
    let o = env.circe(["wait", "--for", &reply, "--timeout", "300ms"]).agent("qa").run();
    o.code(7);
    env.as_(
        "engineer",
        &["send", "--to", "qa", "--intent", "inform", "--in-reply-to", &id, "--summary", "a"],
    )
    .ok();
    let o = env.circe(["wait", "--for", &reply, "--json"]).agent("qa").run();
    o.ok();
    assert_eq!(o.json()["already"], true, "{}", o.show());
    let o = env.circe(["wait", "--for", &reply, "--new", "--timeout", "300ms"]).agent("qa").run();
    o.code(7);
    // A task id is something a reply may answer too.
    env.open_task("T-5");
    env.circe(["wait", "--for", "reply:T-5", "--timeout", "300ms"]).agent("qa").run().code(7);
    let last = if id.ends_with('x') { "y" } else { "x" };
    let nobody = format!("{}{last}", &id[..id.len() - 1]);
    for fresh in [false, true] {
        let mut args = vec!["wait", "--for", "", "--timeout", "5s"];
        let r = format!("reply:{nobody}");
        args[2] = &r;
        if fresh {
            args.push("--new");
        }
        let o = env.circe(args).agent("qa").run();
        o.code(5);
        assert!(o.stderr.contains("nothing can answer it"), "{}", o.show());
    }
}

/// `log`: the newest N, oldest first; `--limit 0` prints nothing; an agent filter matches
/// that agent exactly (qa is not qa-2).
#[test]
fn log_views() {
    let env = Env::new();
    env.circe(["agent", "add", "qa-2", "--role", "qa"]).run().ok();
    for i in 0..5 {
        inform(&env, "engineer", "qa", &format!("q{i}"));
    }
    inform(&env, "engineer", "qa-2", "for qa-2");
    let o = env.circe(["log", "--all", "--limit", "3", "--json"]).run();
    o.ok();
    let got: Vec<u64> = o
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_u64().unwrap())
        .collect();
    assert_eq!(got, [5, 6, 7], "agent_add is event 1");
    assert_eq!(env.circe(["log", "--all", "--limit", "0"]).run().stdout, "");
    let o = env.circe(["log", "--limit", "100", "--json"]).agent("qa").run();
    let n = o.stdout.lines().count();
    assert_eq!(n, 5, "qa's five, not qa-2's: {}", o.stdout);
    let o = env.circe(["log", "--all", "--kind", "agent_add"]).run();
    assert_eq!(o.stdout.lines().count(), 1);
}

/// `log --task`: a task's events; a task that is not here is exit 5 (not a silent nothing),
/// and an archived one points at the archive.
#[test]
fn log_of_one_task_and_of_a_task_that_is_not_here() {
    let env = Env::new();
    env.open_task("T-1");
    let o = env.circe(["log", "--all", "--task", "T-1", "--json"]).run();
    o.ok();
    assert_eq!(o.stdout.lines().count(), 1, "{}", o.show());
    let o = env.circe(["log", "--all", "--task", "T-9"]).run();
    o.code(5);
    assert!(o.stderr.contains("no task `T-9`"), "{}", o.show());
    assert!(o.stdout.is_empty(), "{}", o.show());
    // `--limit 0` asks for nothing, so nothing is missing.
    env.circe(["log", "--all", "--task", "T-9", "--limit", "0"]).run().ok();
    local_only!("the archive is kept by the local engine");
    env.as_("engineer", &["claim", "T-1"]).ok();
    env.as_("engineer", &["status", "T-1", "in_progress"]).ok();
    env.as_("engineer", &["check", "T-1", "tests_passed=true"]).ok();
    env.as_("engineer", &["status", "T-1", "completed"]).ok();
    // The first run files the task and rotates the log; a year on, the second rotates the
    // events the first logged and the third takes the old segments.
    env.circe(["archive"]).now("2031-01-01T00:00:00Z").run().ok();
    env.circe(["archive"]).now("2032-01-01T00:00:00Z").run().ok();
    env.circe(["archive"]).now("2032-01-01T00:00:00Z").run().ok();
    let o = env.circe(["log", "--all", "--task", "T-1"]).run();
    o.code(5);
    assert!(
        o.stderr.contains("was archived") && o.stderr.contains("circe show T-1"),
        "{}",
        o.show()
    );
}

/// A reader that went away ends the command quietly.
#[test]
fn a_closed_pipe_ends_a_stream_quietly() {
    let env = Env::new();
    for i in 0..50 {
        inform(&env, "engineer", "qa", &format!("p{i}"));
    }
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "{} log --all --everything | head -1; echo \"rc=${{PIPESTATUS:-x}}\"",
            exe().display()
        ))
        .current_dir(env.path())
        .env("HOME", env.path());
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("#1 "), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).is_empty(), "no panic, no error");
    // Following with nothing new to print: the reader going away ends it all the same.
    for args in [&["log", "--all", "--follow"][..], &["watch", "--all"][..]] {
        let mut f = spawn(&env, None, args);
        std::thread::sleep(Duration::from_millis(300));
        drop(f.stdout.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(s) = f.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > deadline {
                let _ = f.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.is_some_and(|s| s.success()), "{args:?} went on after its reader left");
    }
}

/// doctor reports a cursor whose consumer stopped a week ago while the log went on.
#[test]
fn doctor_reports_a_stale_cursor() {
    let env = Env::new();
    inform(&env, "engineer", "qa", "one");
    env.circe(["watch", "--all", "--from-start", "--once", "--cursor", "old"]).run().ok();
    env.circe(["doctor"]).run().ok();
    inform(&env, "engineer", "qa", "two");
    let o = env.circe(["doctor"]).now("2025-12-01T00:00:00Z").run();
    o.code(1);
    assert!(o.stderr.contains("cursor old is 1 events behind"), "{}", o.show());
    // Its line says what mends it, and that does.
    assert!(o.stderr.contains("`circe cursors --remove old` if it is"), "{}", o.show());
    env.circe(["cursors", "--remove", "old"]).run().ok();
    env.circe(["doctor"]).now("2025-12-01T00:00:00Z").run().ok();
}

/// `cursors --remove`: a consumer gone for good is forgotten (its cursor and dead letters),
/// a running one's cursor is refused, an unknown name is exit 5; a damaged cursor is shown
/// as damaged, with why.
#[test]
fn a_consumer_gone_for_good_is_removed() {
    let env = Env::new();
    inform(&env, "engineer", "qa", "one");
    env.circe([
        "watch",
        "--all",
        "--from-start",
        "--once",
        "--cursor",
        "old",
        "--exec",
        "exit 1",
        "--max-attempts",
        "1",
    ])
    .run()
    .ok();
    inform(&env, "engineer", "qa", "two");
    env.circe(["doctor"]).now("2025-12-01T00:00:00Z").run().code(1);
    let mut live = spawn(&env, None, &["watch", "--all", "--cursor", "live"]);
    std::thread::sleep(Duration::from_millis(500));
    let o = env.circe(["cursors", "--remove", "live"]).run();
    o.code(4);
    assert!(o.stderr.contains("in use by a running consumer"), "{}", o.show());
    live.kill().unwrap();
    live.wait().unwrap();
    let o = env.circe(["cursors", "--remove", "old", "--json"]).run();
    o.ok();
    assert_eq!(o.json()["removed"]["dead_letters"], 1, "{}", o.show());
    env.circe(["cursors", "--remove", "live"]).run().ok();
    let o = env.circe(["cursors", "--json"]).run();
    assert_eq!(o.json()["cursors"], serde_json::json!([]), "{}", o.show());
    env.circe(["doctor"]).now("2025-12-01T00:00:00Z").run().ok();
    let before = env.state();
    let o = env.circe(["cursors", "--remove", "old"]).run();
    o.code(5);
    assert!(o.stderr.contains("no events cursor `old`"), "{}", o.show());
    crate::common::assert_unchanged(&before, &env.state());
    // A name that never was a cursor gets no lock file either.
    env.circe(["cursors", "--remove", "never-was"]).run().code(5);
    if !crate::common::pg_mode() {
        assert!(!env.root().join("locks/cursor-events-never-was.lock").exists());
    }
    env.circe(["cursors", "--kind", "chat"]).run().code(2);
    local_only!("writes a damaged cursor file by hand");
    std::fs::write(env.root().join("cursors/events/bad"), "{not json").unwrap();
    let o = env.circe(["cursors"]).run();
    o.ok();
    assert!(o.stdout.contains("damaged") && o.stdout.contains("--remove NAME"), "{}", o.show());
    let o = env.circe(["cursors", "--json"]).run();
    assert!(
        o.json()["cursors"][0]["problem"].as_str().unwrap().contains("damaged"),
        "{}",
        o.show()
    );
    env.circe(["cursors", "--remove", "bad"]).run().ok();
    // Dead letters a consumer left without a cursor go too; a name with neither is exit 5.
    let event = env.read("LOGS/events.jsonl").lines().next().unwrap().to_string();
    std::fs::write(env.root().join("dead/ghost.jsonl"), event + "\n").unwrap();
    let listed = env.circe(["cursors", "--json"]).run().json();
    let ghost = &listed["cursors"][0];
    assert_eq!((&ghost["name"], &ghost["dead_letters"]), (&"ghost".into(), &1.into()), "{listed}");
    assert!(ghost["after"].is_null() && ghost["problem"].is_null(), "{listed}");
    let o = env.circe(["cursors", "--remove", "ghost", "--json"]).run();
    o.ok();
    assert_eq!(o.json()["removed"]["dead_letters"], 1, "{}", o.show());
    assert!(!env.root().join("dead/ghost.jsonl").exists());
    env.circe(["cursors", "--remove", "ghost"]).run().code(5);
}

/// `wait --for claimable` sees tasks as `claim --next` does (not one past its deadline), and
/// with `--claim` it reports and hands its hook the task it took, in the agent's INBOX; a
/// hook that fails after the claim says which task the agent now holds.
#[test]
fn wait_claim_reports_the_task_it_took() {
    let env = Env::new();
    env.open_task_due("LATE-1", "all", "2030-01-01T00:00:00Z");
    let late = "2030-06-01T00:00:00Z";
    let o = env
        .circe(["wait", "--for", "claimable", "--timeout", "300ms"])
        .agent("engineer")
        .now(late)
        .run();
    o.code(7);
    // Before its deadline it is the best task (a deadline goes first), though T-1 came last.
    env.open_task("T-1");
    let hook = "test \"$CIRCE_BOX\" = inbox:engineer && test \"$CIRCE_TASK\" = LATE-1";
    let o = env
        .circe(["wait", "--for", "claimable", "--claim", "--json", "--exec", hook])
        .agent("engineer")
        .run();
    o.ok();
    assert_eq!(
        (&o.json()["box"], &o.json()["task_id"]),
        (&"inbox:engineer".into(), &"LATE-1".into())
    );
    let o = env
        .circe(["wait", "--for", "claimable", "--claim", "--json", "--exec", "exit 1"])
        .agent("engineer")
        .run();
    o.code(1);
    assert_eq!(o.json()["error"]["details"]["task_id"], "T-1", "{}", o.show());
}

/// `wait --for claimable` answering "already" names the task `claim --next` would take (the
/// best by priority), not the first on the board; `--claim` takes that one.
#[test]
fn a_claimable_wait_names_the_task_claim_next_takes() {
    let env = Env::new();
    for t in ["A-1", "A-2", "A-3"] {
        env.open_task(t);
    }
    let high = ["send", "--to", "all", "--intent", "implement_feature", "--task", "A-4"];
    env.as_("coordinator", &[&high[..], &["--priority", "high", "--summary", "now"]].concat());
    let dry = env.circe(["claim", "--next", "--dry-run", "--json"]).agent("engineer").run();
    assert_eq!(dry.ok().json()["task_id"], "A-4", "{}", dry.show());
    let o = env.circe(["wait", "--for", "claimable", "--json"]).agent("engineer").run();
    assert_eq!(o.ok().json()["task_id"], "A-4", "{}", o.show());
    let o = env.circe(["wait", "--for", "claimable", "--claim", "--json"]).agent("engineer").run();
    assert_eq!(o.ok().json()["task_id"], "A-4", "{}", o.show());
}

/// A lease running out is no event: `wait --for claimable` looks again when the first lease
/// of a task the agent could take over runs out, and `--claim` takes it over.
#[test]
fn wait_for_claimable_wakes_when_a_lease_runs_out() {
    let env = Env::new();
    env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run().ok();
    env.open_task("T-1");
    // The clock as it runs (an empty CIRCE_NOW pins nothing).
    env.circe(["claim", "T-1", "--ttl", "2s"]).agent("engineer").now("").run().ok();
    let o = env
        .circe(["wait", "--for", "claimable", "--claim", "--json", "--timeout", "30s"])
        .agent("engineer-2")
        .now("")
        .run();
    o.ok();
    let j = o.json();
    assert_eq!(
        (&j["task_id"], &j["claimed"]["expired_owner"], &j["box"]),
        (&"T-1".into(), &"engineer".into(), &"inbox:engineer-2".into()),
        "{}",
        o.show()
    );
}

/// `wait --for inbox` answering "already" hands on the oldest message (by time, then its
/// sender's number), as `inbox` lists them, not the first by file name: handing on a later
/// one would make the earlier one of the same sender stale, unseen.
#[test]
fn an_inbox_wait_hands_on_the_oldest_message() {
    let env = Env::new();
    let q = env.as_(
        "coordinator",
        &[
            "send",
            "--json",
            "--to",
            "agent:engineer",
            "--intent",
            "question",
            "--summary",
            "which db?",
        ],
    );
    let q = q.ok().json()["delivered"][0]["file"].as_str().unwrap().to_string();
    env.as_(
        "coordinator",
        &["send", "--to", "agent:engineer", "--intent", "inform", "--summary", "fyi"],
    )
    .ok();
    let o = env.circe(["wait", "--for", "inbox", "--json"]).agent("engineer").run();
    assert_eq!(o.ok().json()["file"], q, "{}", o.show());
    let inbox = env.as_("engineer", &["inbox", "--json"]);
    assert_eq!(inbox.ok().json()["stale"].as_array().map(Vec::len), Some(0), "{}", inbox.show());
}

/// `wait --poll` looks at its condition each period too, not only on events: a message
/// dropped into the INBOX by another tool (or a change an older circe logged without an
/// id) ends it.
#[test]
fn a_polling_wait_sees_what_came_without_an_event() {
    local_only!("drops a file into a local INBOX");
    let env = Env::new();
    let args = ["wait", "--for", "inbox", "--new", "--poll", "200ms", "--timeout", "1s"];
    // --new: only what comes after it began, which a look cannot tell: events only.
    let mut fresh = spawn(&env, Some("qa"), &args);
    let child =
        spawn(&env, Some("qa"), &["wait", "--for", "inbox", "--poll", "200ms", "--timeout", "20s"]);
    std::thread::sleep(Duration::from_millis(500));
    let msg = "# MESSAGE\nfrom: engineer\nto: agent:qa\nintent: inform\nstatus: new\ncreated_at: 2025-11-21T17:00:00Z\nmsg_id: 20251121T170000000Z-dropped1\n\n## Summary\ndropped in\n";
    std::fs::write(env.root().join("AGENTS/qa/INBOX/20251121_170000_engineer-qa_inform.md"), msg)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("a message is in your INBOX"), "{stdout}");
    assert_eq!(fresh.wait().unwrap().code(), Some(7));
}

/// `wait --for claimable --claim` whose task's lock another process holds past the lock's
/// wait (10 s) waits on, and claims the task once the lock is free, instead of exit 4.
#[test]
fn a_claiming_wait_outlasts_a_lock_held_past_its_wait() {
    local_only!("holds a task's lock file with flock");
    let env = Env::new();
    env.open_task("L-1");
    let lock = env.root().join("locks/task-L-1.lock");
    let mut holder = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sleep", "11"])
        .spawn()
        .expect("flock(1) runs");
    std::thread::sleep(Duration::from_millis(300));
    let o = env
        .circe(["wait", "--for", "claimable", "--claim", "--json", "--timeout", "40s"])
        .agent("engineer")
        .run();
    let _ = holder.wait();
    o.ok();
    assert_eq!(o.json()["task_id"], "L-1", "{}", o.show());
}

/// `--after` past the newest event would save a cursor that skips the events in between
/// as they come: refused, and nothing is saved.
#[test]
fn after_past_the_newest_event_is_refused() {
    let env = Env::new();
    env.open_task("T-1");
    let o = env.circe(["watch", "--all", "--cursor", "far", "--after", "999", "--once"]).run();
    assert_eq!(o.code, 2, "{}", o.show());
    assert!(o.stderr.contains("--after 999 is past the newest event (1)"), "{}", o.show());
    let cursors = env.circe(["--json", "cursors"]).run().json();
    assert!(!cursors.to_string().contains("\"far\""), "{cursors}");
    env.circe(["watch", "--all", "--cursor", "far", "--after", "1", "--once"]).run().ok();
}

/// `wait --for claimable` that holds already names the task's message, for `--json` and
/// for a hook, as the inbox condition does.
#[test]
fn a_claimable_wait_that_holds_names_the_message() {
    let env = Env::new();
    env.open_task("T-1");
    let ticket = env.ls("NEW_MESSAGES").pop().unwrap();
    let o = env.circe(["--json", "wait", "--for", "claimable"]).agent("engineer").run();
    o.ok();
    assert_eq!(
        (o.json()["box"].as_str(), o.json()["file"].as_str()),
        (Some("new"), Some(ticket.as_str()))
    );
    // A path in a folder; the bare name in a database.
    let hook = format!(
        "test \"$CIRCE_BOX\" = new && case \"$CIRCE_FILE\" in *{ticket}) ;; *) exit 1 ;; esac"
    );
    env.circe(["wait", "--for", "claimable", "--exec", &hook]).agent("engineer").run().ok();
}

/// A sender cut off after its delivery and before it logged its events: a watcher still hands
/// the message on (a follower logs such events when the log is quiet, as `send` with the same
/// id, `archive` and `doctor --repair` do), and so does a wait.
#[test]
fn a_follower_hands_on_a_send_whose_sender_died_before_logging_it() {
    local_only!("the local engine keeps a delivery's events in a journal file until logged");
    let env = Env::new();
    env.circe(["watch", "--cursor", "qa", "--once"]).agent("qa").run().ok();
    let mut w = spawn(&env, Some("qa"), &["watch", "--cursor", "qa", "--json", "--kind", "send"]);
    let waiting =
        spawn(&env, Some("qa"), &["wait", "--for", "inbox", "--new", "--json", "--timeout", "15s"]);
    std::thread::sleep(Duration::from_millis(500));
    let cut = ["send", "--to", "qa", "--intent", "inform", "--summary", "cut off"];
    env.circe(cut).agent("engineer").var("CIRCE_CRASH_AT", "send.logging").run().code(86);
    let got = lines(&mut w, 1);
    let _ = w.kill();
    assert_eq!(got.len(), 1, "the watcher never handed on the delivered message");
    assert_eq!(
        (&got[0]["event"], &got[0]["agent"]),
        (&Value::from("send"), &Value::from("engineer"))
    );
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(env.ls_all("tmp").is_empty(), "{:?}", env.ls_all("tmp"));
}

/// Two claiming waits of the same agent woken by one event take two tasks: a task the
/// other one took meanwhile is no answer for `claim --next` (it looks on), only a claim of
/// its own that was cut off is.
#[test]
fn two_claiming_waits_of_one_agent_take_two_tasks() {
    for round in 0..4 {
        let env = Env::new();
        let open = |t: &str| {
            let to = ["send", "--to", "role:engineer", "--intent", "implement_feature"];
            env.as_("coordinator", &[&to[..], &["--task", t, "--summary", t]].concat()).ok();
        };
        open("T-1");
        let args = ["wait", "--for", "claimable", "--new", "--claim", "--timeout", "10s", "--json"];
        let (a, b) = (spawn(&env, Some("engineer"), &args), spawn(&env, Some("engineer"), &args));
        std::thread::sleep(Duration::from_millis(400));
        open("T-2");
        let got: Vec<String> = [a, b]
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
                assert_eq!(v["claimed"]["already_held"], Value::Bool(false), "round {round}: {v}");
                v["task_id"].as_str().unwrap_or("none").to_string()
            })
            .collect();
        assert!(got[0] != got[1] && !got.contains(&"none".to_string()), "round {round}: {got:?}");
    }
}

/// A hook that hangs is bounded: `--exec-timeout` ends it (its process group) as a failed run,
/// and SIGTERM ends the stream at once, the event not handed on (the cursor stays before it).
#[test]
fn a_hanging_hook_is_ended_by_its_timeout_and_by_sigterm() {
    let env = Env::new();
    inform(&env, "engineer", "qa", "hello");
    let started = Instant::now();
    let o = env
        .circe([
            "watch",
            "--all",
            "--from-start",
            "--once",
            "--cursor",
            "t",
            "--kind",
            "send",
            "--exec",
            "sleep 30",
            "--exec-timeout",
            "300ms",
            "--max-attempts",
            "1",
        ])
        .now("")
        .run();
    o.ok();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(o.stderr.contains("ran longer than --exec-timeout 300ms"), "{}", o.show());
    // SIGHUP (a terminal closed) as SIGTERM: a hook left running would run again, at the
    // same time, under a consumer started anew.
    for (sig, cursor, hook) in [("-TERM", "s", "sleep 37.25"), ("-HUP", "h", "sleep 37.5")] {
        let mut w = spawn(
            &env,
            None,
            &[
                "watch",
                "--all",
                "--from-start",
                "--cursor",
                cursor,
                "--kind",
                "send",
                "--exec",
                // The hook's shell waits on a process of its own: the whole group goes.
                &format!("{hook} & wait"),
            ],
        );
        std::thread::sleep(Duration::from_millis(700));
        let stopped = Instant::now();
        Command::new("kill").args([sig, &w.id().to_string()]).status().unwrap();
        let _ = w.wait();
        assert!(stopped.elapsed() < Duration::from_secs(5), "{sig}: {:?}", stopped.elapsed());
        std::thread::sleep(Duration::from_millis(200));
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|p| std::fs::read(p.ok()?.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.starts_with(hook))
            .collect();
        assert!(left.is_empty(), "{sig}: the hook's child outlived it: {left:?}");
        let again = env
            .circe(["watch", "--all", "--once", "--cursor", cursor, "--json", "--kind", "send"])
            .run();
        again.ok();
        assert_eq!(
            again.stdout.lines().count(),
            1,
            "{sig}: the event the hook was ended on comes again"
        );
    }
}

/// An agent's stream follows the tasks it opened: the coordinator sees its task claimed and
/// completed without `--all` (and not the checks on the way); another agent sees none of it.
#[test]
fn an_openers_stream_follows_the_tasks_it_opened() {
    let env = Env::new();
    env.complete_task("T-1");
    let kinds = |who: &str| -> Vec<String> {
        let o = env.as_(who, &["log", "--json"]);
        o.ok();
        o.stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].to_string())
            .collect()
    };
    let mine = kinds("coordinator");
    for k in ["\"open\"", "\"claim\"", "\"start\"", "\"complete\""] {
        assert!(mine.iter().any(|m| m == k), "{k} missing from {mine:?}");
    }
    assert!(!mine.iter().any(|m| m == "\"check\""), "{mine:?}");
    assert!(kinds("qa").is_empty(), "{:?}", kinds("qa"));
}

/// `log --kind`: exactly the events of those kinds the whole log holds, newest last, the
/// limit counting only them, as a filter of the whole log gives them.
#[test]
fn log_of_some_kinds_is_the_whole_log_filtered() {
    let env = Env::new();
    for i in 0..12 {
        let t = format!("K-{i}");
        env.open_task(&t);
        if i % 3 == 0 {
            env.as_("engineer", &["claim", &t]).ok();
        }
        if i == 7 {
            env.circe(["agent", "add", "late", "--role", "qa"]).run().ok();
        }
    }
    let ids = |args: &[&str]| -> Vec<(u64, String)> {
        let o = env.circe(args).run();
        o.ok();
        o.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|v| (v["id"].as_u64().unwrap(), v["event"].as_str().unwrap().to_string()))
            .collect()
    };
    let all = ids(&["log", "--all", "--limit", "1000", "--json"]);
    let want: Vec<(u64, String)> =
        all.iter().filter(|(_, k)| k == "claim" || k == "agent_add").cloned().collect();
    assert!(want.len() >= 5, "{all:?}");
    let got = ids(&["log", "--all", "--kind", "claim,agent_add", "--limit", "1000", "--json"]);
    assert_eq!(got, want);
    let last_two = ids(&["log", "--all", "--kind", "claim,agent_add", "--limit", "2", "--json"]);
    assert_eq!(last_two, want[want.len() - 2..]);
}

/// An older circe still writing to the root is named by doctor.
#[test]
fn an_older_circe_writing_to_the_root_is_reported_by_doctor() {
    local_only!("an older circe wrote the local event log");
    // Event lines of a circe that gave no ids (`ts` first): written after this circe's, in
    // the last day, doctor says an older circe writes here; before them, or older, they are
    // an upgraded root's history.
    let env = Env::new();
    inform(&env, "coordinator", "qa", "m0");
    let log = env.root().join("LOGS/events.jsonl");
    let older = |ts: &str| {
        format!(
            "{{\"ts\":\"{ts}\",\"event\":\"claim\",\"agent\":\"engineer\",\"task\":\"A-1\",\"from\":\"new\",\"to\":\"claimed\",\"epoch\":1}}\n"
        )
    };
    let base = env.read("LOGS/events.jsonl");
    // A line of an older circe's, from before this circe's (an upgraded root): history.
    std::fs::write(&log, format!("{}{base}", older("2025-11-21T16:00:00.000Z"))).unwrap();
    env.circe(["doctor"]).run().ok();
    // One after this circe's, of the last day: an older circe still writes here.
    std::fs::write(&log, format!("{base}{}", older("2025-11-21T17:00:00.000Z"))).unwrap();
    let doc = env.circe(["doctor"]).run();
    assert_eq!(doc.code, 1, "{}", doc.show());
    assert!(doc.stderr.contains("1 event line(s) of the last day without an id after this circe's own, the first at line 2: an older circe writes to this root"), "{}", doc.show());
    // A week later it is history.
    let later = env.circe(["doctor"]).now("2025-11-28T17:00:00Z").run();
    later.ok();
}

/// A passed check whose event is not in the log is never shown as run: while the log holds
/// the task's whole history (its `open` event) as edited by hand, else (the log moved on)
/// as not known to be run.
#[test]
fn a_check_without_its_event_is_not_shown_as_run() {
    local_only!("edits the event log by hand");
    let env = Env::new();
    env.open_task("C-1");
    env.as_("engineer", &["claim", "C-1"]).ok();
    env.as_("engineer", &["check", "C-1", "--run", "tests_passed", "--", "true"]).ok();
    let s = env.circe(["show", "C-1"]).run();
    assert!(s.ok().stdout.contains("tests_passed: true  (run by engineer"), "{}", s.show());
    // The log without the lines of one kind of event.
    let drop_kind = |kind: &str| {
        let kept: String = env
            .read("LOGS/events.jsonl")
            .lines()
            .filter(|l| !l.contains(&format!("\"event\":\"{kind}\"")))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(env.root().join("LOGS/events.jsonl"), kept).unwrap();
    };
    drop_kind("check");
    let s = env.circe(["show", "C-1"]).run();
    let said = "tests_passed: true  (but no check event records it: .checks edited by hand?)";
    assert!(s.ok().stdout.contains(said), "{}", s.show());
    drop_kind("open");
    let s = env.circe(["show", "C-1"]).run();
    assert!(
        s.ok()
            .stdout
            .contains("tests_passed: true  (run or asserted: its check event is not in the log)"),
        "{}",
        s.show()
    );
}

/// A line added to the event log by hand with a lower id does not make circe give ids
/// again: a watcher parked past that id still gets the next event, doctor names the line,
/// and an id that cannot grow is an error, never a wrap to 0.
#[test]
fn a_line_added_by_hand_with_a_lower_id_makes_no_id_given_twice() {
    local_only!("edits the event log by hand");
    let env = Env::new();
    for i in 0..5 {
        inform(&env, "coordinator", "qa", &format!("m{i}"));
    }
    env.circe(["watch", "--cursor", "w1", "--once"]).run().ok();
    let log = env.root().join("LOGS/events.jsonl");
    let first = env.read("LOGS/events.jsonl").lines().next().unwrap().to_string();
    let forged = |id: &str| {
        first.replacen(&format!("{{\"id\":{}", first_id(&first)), &format!("{{\"id\":{id}"), 1)
    };
    let mut text = env.read("LOGS/events.jsonl");
    text.push_str(&forged("2"));
    text.push('\n');
    std::fs::write(&log, &text).unwrap();
    inform(&env, "coordinator", "qa", "after");
    let ids: Vec<u64> = env.events().iter().map(|e| e["id"].as_u64().unwrap()).collect();
    let last = *ids.last().unwrap();
    assert_eq!(last, 6, "the next id follows the highest, not the line added: {ids:?}");
    let w = env.circe(["watch", "--cursor", "w1", "--once", "--json"]).run();
    w.ok();
    assert!(w.stdout.contains("\"id\":6"), "the watcher got the next event: {}", w.show());
    let doc = env.circe(["doctor"]).run();
    assert_eq!(doc.code, 1, "{}", doc.show());
    assert!(doc.stderr.contains("line 6 has id 2, lower than 5"), "{}", doc.show());
    // The highest id there is: the next one cannot be given.
    let mut text = env.read("LOGS/events.jsonl");
    text.push_str(&forged(&u64::MAX.to_string()));
    text.push('\n');
    std::fs::write(&log, &text).unwrap();
    let o = env.as_("coordinator", &["send", "--to", "qa", "--intent", "inform", "--summary", "x"]);
    assert_eq!(o.code, 1, "{}", o.show());
    assert!(o.stderr.contains("no id follows it"), "{}", o.show());
    assert!(!env.read("LOGS/events.jsonl").lines().any(|l| l.starts_with("{\"id\":0,")));
}

/// The id at the start of an event line.
fn first_id(line: &str) -> u64 {
    line["{\"id\":".len()..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// `log --since` passes over an event stamped before it by a clock stepped back a little,
/// and shows the events after it; `--everything --since` reads the whole log.
#[test]
fn log_since_reads_past_a_clock_stepped_back() {
    let env = Env::new();
    let inform = |at: &str, s: &str| {
        env.at(
            at,
            "coordinator",
            &["send", "--to", "agent:qa", "--intent", "inform", "--summary", s],
        )
        .ok();
    };
    inform("2025-01-01T00:00:00Z", "a-year-before");
    inform("2026-01-01T12:00:00Z", "first");
    inform("2026-01-01T11:55:00Z", "stepped-back");
    inform("2026-01-01T12:01:00Z", "third");
    inform("2026-01-01T12:02:00Z", "fourth");
    let since = ["log", "--all", "--since", "2026-01-01T11:58:00Z"];
    let shown = env.circe(since).run();
    shown.ok();
    assert!(shown.stdout.contains("20260101_120000"), "{}", shown.show());
    assert!(shown.stdout.contains("20260101_120100"), "{}", shown.show());
    assert!(shown.stdout.contains("20260101_120200"), "{}", shown.show());
    assert!(!shown.stdout.contains("20260101_115500"), "{}", shown.show());
    let all = env.circe(["log", "--all", "--everything", "--since", "2026-01-01T11:58:00Z"]).run();
    assert_eq!(all.stdout.lines().count(), 3, "{}", all.show());
}

#[test]
fn an_empty_exec_hook_is_a_usage_error() {
    let env = Env::new();
    for args in [
        &["watch", "--once", "--exec", ""][..],
        &["wait", "--for", "inbox", "--timeout", "1s", "--exec", ""][..],
    ] {
        let o = env.as_("engineer", args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.show());
    }
}
