//! `circe chat say|watch|archive`: the reference's lines and JSON, names, the channel file,
//! cursors, replaced and truncated files, archives.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Env, assert_unchanged, exe};

/// The JSON lines of `chat watch ARGS`, each checked for the reference's field order.
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| {
            let keys = crate::common::top_level_keys(l);
            let want = ["timestamp", "sender", "recipient", "broadcast", "message", "line_number"];
            assert_eq!(keys[..6], want, "field order of {l}");
            serde_json::from_str(l).unwrap()
        })
        .collect()
}

fn once(env: &Env, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["chat", "watch", "--once"];
    args.extend_from_slice(extra);
    let out = env.circe(args).run();
    out.ok();
    lines(&out.stdout)
}

const EXAMPLES: &str = "# the reference's examples
[sender-to-recipient]: message content here
[coder-to-reviewer]: Please review changes in src/auth.rs — added JWT validation
[sender-to-recipient] @ [target1, target2]: message content here
[reviewer-to-coder] @ [developer, manager]: Approved with minor suggestions — see inline comments
[reviewer-to-coder] @ [developer]: Acknowledged — starting review

[coder-to-reviewer]: Review needed for auth module
  Changes:
  - Added JWT validation in src/auth.rs
  - Updated middleware in src/middleware.rs
  - Added tests in tests/auth_test.rs
";

#[test]
fn watch_prints_the_reference_json_for_its_examples() {
    local_only!("the test writes chat.md by hand");
    let env = Env::new();
    std::fs::write(env.root().join("chat.md"), EXAMPLES).unwrap();
    let got = once(&env, &["--from-start"]);
    let m = |s: &str, r: &str, b: Value, msg: &str, n: u64| json!({"timestamp": "2025-11-21T17:00:00.000Z", "sender": s, "recipient": r, "broadcast": b, "message": msg, "line_number": n});
    let multi = "Review needed for auth module\nChanges:\n- Added JWT validation in src/auth.rs\n- Updated middleware in src/middleware.rs\n- Added tests in tests/auth_test.rs";
    assert_eq!(
        got,
        [
            m("sender", "recipient", json!([]), "message content here", 2),
            m(
                "coder",
                "reviewer",
                json!([]),
                "Please review changes in src/auth.rs — added JWT validation",
                3
            ),
            m("sender", "recipient", json!(["target1", "target2"]), "message content here", 4),
            m(
                "reviewer",
                "coder",
                json!(["developer", "manager"]),
                "Approved with minor suggestions — see inline comments",
                5
            ),
            m("reviewer", "coder", json!(["developer"]), "Acknowledged — starting review", 6),
            m("coder", "reviewer", json!([]), multi, 8),
        ]
    );
    let first = once(&env, &["--from-start", "--first-line-only"]);
    assert_eq!(first[5]["message"], "Review needed for auth module");
    // Without --from-start (and no cursor) it starts at the end, like the reference.
    assert!(once(&env, &[]).is_empty());
}

#[test]
fn say_appends_one_message_and_reads_back() {
    let env = Env::new();
    env.as_("engineer", &["chat", "say", "--to", "qa", "tests", "are", "green"]).ok();
    let out = env
        .circe(["chat", "say", "--to", "engineer", "--cc", "coordinator, scribe"])
        .agent("qa")
        .stdin(b"found two bugs\n  - the first\n\nsecond paragraph\n")
        .run();
    out.ok();
    assert!(out.stdout.starts_with("said to engineer in "), "{}", out.stdout);
    let out = env.circe(["--json", "chat", "say", "--to", "all", "ok"]).agent("coordinator").run();
    out.ok();
    assert_eq!(
        out.json(),
        json!({"timestamp": "2025-11-21T17:00:00.000Z", "sender": "coordinator", "recipient": "all", "broadcast": [], "message": "ok", "line_number": 6})
    );
    assert_eq!(
        env.read("chat.md"),
        "[engineer-to-qa]: tests are green\n\
         [qa-to-engineer] @ [coordinator, scribe]: found two bugs\n    - the first\n  \n  second paragraph\n\
         [coordinator-to-all]: ok\n"
    );
    let got = once(&env, &["--from-start"]);
    assert_eq!(got.len(), 3);
    assert_eq!(got[1]["message"], "found two bugs\n  - the first\n\nsecond paragraph");
    assert_eq!(got[1]["broadcast"], json!(["coordinator", "scribe"]));
    assert_eq!(got[2]["line_number"], 6);
}

#[test]
fn say_checks_names_and_text_and_changes_nothing_when_refused() {
    let env = Env::new();
    env.as_("engineer", &["chat", "say", "--to", "qa", "first"]).ok();
    let before = env.state();
    let o = env.as_("engineer", &["chat", "say", "--to", "nobody", "x"]);
    o.code(5);
    assert!(
        o.stderr.contains("no agent `nobody`") && o.stderr.contains("hint: `circe agent list`"),
        "{}",
        o.stderr
    );
    env.as_("engineer", &["chat", "say", "--to", "qa", "--cc", "qa,ghost", "x"]).code(5);
    env.as_("ghost", &["chat", "say", "--to", "qa", "x"]).code(5);
    let o = env.circe(["chat", "say", "--to", "qa", "x"]).run();
    o.code(2);
    assert!(o.stderr.contains("--agent"), "{}", o.stderr);
    let o = env.circe(["chat", "say", "--to", "qa"]).agent("engineer").stdin(b"  \n\n").run();
    o.code(2);
    assert!(o.stderr.contains("empty"), "{}", o.stderr);
    assert_unchanged(&before, &env.state());
}

#[test]
fn say_adds_the_missing_newline_of_a_hand_edit() {
    local_only!("the test writes chat.md by hand");
    let env = Env::new();
    std::fs::write(env.root().join("chat.md"), "[qa-to-engineer]: no newline").unwrap();
    env.as_("engineer", &["chat", "say", "--to", "qa", "reply"]).ok();
    assert_eq!(env.read("chat.md"), "[qa-to-engineer]: no newline\n[engineer-to-qa]: reply\n");
}

#[test]
fn say_never_writes_through_a_symlink() {
    local_only!("the test puts a symlink where a local root keeps chat.md");
    let env = Env::new();
    let bait = env.path().join("bait.md");
    std::fs::write(&bait, "outside\n").unwrap();
    std::os::unix::fs::symlink(&bait, env.root().join("chat.md")).unwrap();
    let o = env.as_("engineer", &["chat", "say", "--to", "qa", "x"]);
    o.code(3);
    assert!(o.stderr.contains("symbolic link"), "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(&bait).unwrap(), "outside\n");
}

/// A channel path that names a device (`/dev/null`), outside the root where `doctor
/// --repair` moves nothing, is refused by `config --set` (nothing changes) and by every
/// chat command when written by hand, pointing at `chat: path:`; a pipe where the root
/// keeps `chat.md` is said to be one, with a way out that works (doctor does not touch it).
#[test]
fn a_channel_that_is_no_plain_file_gets_a_way_out_that_works() {
    local_only!("`chat: path:` places the file beside a local root");
    let env = Env::new();
    let cfg = env.root().join("circe.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let null = format!("{text}chat: {{path: /dev/null}}\n");
    let new = env.path().join("new.yaml");
    std::fs::write(&new, &null).unwrap();
    let before = env.state();
    let o = env.circe(["config", "--set", new.to_str().unwrap()]).run();
    o.code(3);
    assert_unchanged(&before, &env.state());
    std::fs::write(&cfg, &null).unwrap();
    let say = env.as_("engineer", &["chat", "say", "--to", "qa", "x"]);
    let watch = env.circe(["chat", "watch", "--once", "--from-start"]).run();
    for o in [&o, &say, &watch] {
        o.code(3);
        assert!(o.stderr.contains("names a device (/dev/null), not a file"), "{}", o.show());
        assert!(o.stderr.contains("in circe.yaml's `chat: path:`"), "{}", o.show());
        assert!(!o.stderr.contains("doctor") && !o.stderr.contains("move"), "{}", o.show());
    }
    std::fs::write(&cfg, &text).unwrap();
    let made = std::process::Command::new("mkfifo").arg(env.root().join("chat.md")).status();
    assert!(made.unwrap().success(), "mkfifo");
    let say = env.as_("engineer", &["chat", "say", "--to", "qa", "x"]);
    let watch = env.circe(["chat", "watch", "--once", "--from-start"]).run();
    for o in [&say, &watch] {
        o.code(3);
        assert!(
            o.stderr.contains("chat.md is a pipe, not the chat channel's file"),
            "{}",
            o.show()
        );
        assert!(o.stderr.contains("hint: move it away"), "{}", o.show());
        assert!(!o.stderr.contains("doctor"), "{}", o.show());
    }
    std::fs::remove_file(env.root().join("chat.md")).unwrap();
    env.as_("engineer", &["chat", "say", "--to", "qa", "x"]).ok();
}

#[test]
fn the_channel_path_comes_from_circe_yaml() {
    local_only!("`chat: path:` places the file beside a local root");
    let env = Env::new();
    let cfg = env.root().join("circe.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}chat:\n  path: .workplace/chat.md\n")).unwrap();
    env.as_("engineer", &["chat", "say", "--to", "qa", "here"]).ok();
    let f = std::fs::read_to_string(env.path().join(".workplace/chat.md")).unwrap();
    assert_eq!(f, "[engineer-to-qa]: here\n");
    assert!(!env.root().join("chat.md").exists());
    assert_eq!(once(&env, &["--from-start"])[0]["message"], "here");
    std::fs::write(&cfg, format!("{text}chat:\n  file: x\n")).unwrap();
    env.as_("engineer", &["chat", "say", "--to", "qa", "x"]).code(3);
    // Never inside the root's own folders (a box would hold the channel as a stray), never a
    // folder: refused by `config --set`, and by `chat say` when written by hand.
    std::fs::create_dir_all(env.path().join(".workplace/folder")).unwrap();
    for (path, says) in [
        (".circe/AGENTS/qa/INBOX/chat.md", "inside the root"),
        (".circe/circe.yaml", "inside the root"),
        ("nowhere/../.circe/AGENTS/qa/INBOX/chat.md", "inside the root"),
        (".workplace/folder", "is a folder"),
        (".workplace/", "names a folder"),
        (".workplace/new/..", "names a folder"),
    ] {
        std::fs::write(&cfg, &text).unwrap();
        let new = env.path().join("new.yaml");
        std::fs::write(&new, format!("{text}chat:\n  path: {path}\n")).unwrap();
        let before = env.state();
        let o = env.circe(["config", "--set", new.to_str().unwrap()]).run();
        assert_eq!(o.code, 3, "{}", o.show());
        assert!(o.stderr.contains(says), "{}", o.show());
        assert_unchanged(&before, &env.state());
        std::fs::write(&cfg, format!("{text}chat:\n  path: {path}\n")).unwrap();
        let o = env.as_("engineer", &["chat", "say", "--to", "qa", "x"]);
        assert_eq!(o.code, 3, "{}", o.show());
        assert!(o.stderr.contains(says), "{}", o.show());
    }
    assert!(!env.root().join("AGENTS/qa/INBOX/chat.md").exists());
    // A file or FIFO where the channel's folder goes: said as such, with the way out.
    std::fs::write(env.path().join(".workplace/plain"), "a file\n").unwrap();
    std::fs::write(&cfg, format!("{text}chat:\n  path: .workplace/plain/chat.md\n")).unwrap();
    let o = env.as_("engineer", &["chat", "say", "--to", "qa", "x"]);
    assert_eq!(o.code, 3, "{}", o.show());
    assert!(
        o.stderr.contains(".workplace/plain (or a folder above it) is not a folder"),
        "{}",
        o.show()
    );
    assert!(o.stderr.contains("move what stands there aside"), "{}", o.show());
    assert_eq!(std::fs::read_to_string(env.path().join(".workplace/plain")).unwrap(), "a file\n");
    std::fs::write(&cfg, &text).unwrap();
    // Beside the root's own files, a file of its own is fine.
    let new = env.path().join("new.yaml");
    std::fs::write(&new, format!("{text}chat:\n  path: .circe/team.md\n")).unwrap();
    env.circe(["config", "--set", new.to_str().unwrap()]).run().ok();
}

#[test]
fn a_cursor_resumes_where_the_last_watcher_stopped() {
    let env = Env::new();
    env.as_("engineer", &["chat", "say", "--to", "qa", "one"]).ok();
    env.as_("engineer", &["chat", "say", "--to", "qa", "two"]).ok();
    assert_eq!(once(&env, &["--cursor", "qa", "--from-start"]).len(), 2);
    assert!(once(&env, &["--cursor", "qa", "--from-start"]).is_empty());
    env.as_("engineer", &["chat", "say", "--to", "qa", "three"]).ok();
    let got = once(&env, &["--cursor", "qa"]);
    assert_eq!(
        (got.len(), &got[0]["message"], &got[0]["line_number"]),
        (1, &json!("three"), &json!(3))
    );
    // A new cursor without --from-start starts at the end, and keeps that place: what is
    // said before its next run is seen then.
    assert!(once(&env, &["--cursor", "late"]).is_empty());
    env.as_("engineer", &["chat", "say", "--to", "qa", "four"]).ok();
    let got = once(&env, &["--cursor", "late"]);
    assert_eq!((got.len(), &got[0]["message"]), (1, &json!("four")), "{got:?}");
    env.circe(["chat", "watch", "--once", "--cursor", "../x"]).run().code(3);
    // `circe cursors` lists a chat cursor with the last line it handed on, and when.
    let listed = env.circe(["cursors", "--json"]).run().ok().json();
    let qa = listed["cursors"].as_array().unwrap().iter().find(|c| c["name"] == "qa").cloned();
    let qa = qa.unwrap_or_else(|| panic!("no cursor qa in {listed}"));
    assert_eq!(
        (&qa["kind"], &qa["after"], &qa["problem"]),
        (&json!("chat"), &json!(3), &Value::Null)
    );
    let saved = qa["saved_at"].as_str().unwrap_or_else(|| panic!("no saved_at in {qa}"));
    assert!(chrono::DateTime::parse_from_rfc3339(saved).is_ok(), "{saved}");
    local_only!("the cursor is a file, and the test rewrites chat.md by hand");
    let c: Value = serde_json::from_str(&env.read("cursors/chat/qa")).unwrap();
    assert_eq!((&c["version"], &c["offset"], &c["line"]), (&json!(1), &json!(68), &json!(4)));
    // A cursor whose file was rewritten in place is read again from the start.
    std::fs::write(
        env.root().join("chat.md"),
        "[a-to-b]: rewritten, longer than before ........\n",
    )
    .unwrap();
    let o = env.circe(["chat", "watch", "--once", "--cursor", "qa"]).run();
    o.ok();
    assert!(o.stderr.contains("changed under the cursor"), "{}", o.stderr);
    assert_eq!(lines(&o.stdout).len(), 1);
}

#[test]
fn archive_moves_the_channel_and_cursors_follow() {
    let env = Env::new();
    for t in ["one", "two", "three"] {
        env.as_("engineer", &["chat", "say", "--to", "qa", t]).ok();
    }
    assert_eq!(once(&env, &["--cursor", "qa", "--from-start"]).len(), 3);
    assert_eq!(once(&env, &["--cursor", "slow", "--from-start"]).len(), 3);
    env.as_("engineer", &["chat", "say", "--to", "qa", "four"]).ok();
    // `slow` has seen three of four messages when the channel is archived.
    let o = env.circe(["--json", "chat", "archive"]).run();
    o.ok();
    assert_eq!((&o.json()["lines"], &o.json()["bytes"]), (&json!(4), &json!(91)));
    assert_eq!(env.read("chat.md"), "");
    assert_eq!(env.ls("LOGS/chat"), ["chat-20251121T170000000Z.md"]);
    env.as_("engineer", &["chat", "say", "--to", "qa", "five"]).ok();
    let got = once(&env, &["--cursor", "slow"]);
    let msgs: Vec<&Value> = got.iter().map(|v| &v["message"]).collect();
    assert_eq!(msgs, [&json!("four"), &json!("five")]);
    assert_eq!((&got[0]["line_number"], &got[1]["line_number"]), (&json!(4), &json!(1)));
    // --from-start reads the channel, not its archives.
    let fresh = once(&env, &["--from-start"]);
    assert_eq!((fresh.len(), &fresh[0]["message"]), (1, &json!("five")));
    // --before keeps the tail in the channel; positions in it move with it.
    env.as_("engineer", &["chat", "say", "--to", "qa", "six"]).ok();
    env.as_("engineer", &["chat", "say", "--to", "qa", "seven"]).ok();
    assert_eq!(once(&env, &["--cursor", "qa"]).len(), 4);
    let o = env.circe(["chat", "archive", "--before", "2"]).run();
    o.ok();
    assert_eq!(env.read("chat.md"), "[engineer-to-qa]: six\n[engineer-to-qa]: seven\n");
    assert_eq!(env.ls("LOGS/chat").len(), 2);
    env.as_("engineer", &["chat", "say", "--to", "qa", "eight"]).ok();
    let got = once(&env, &["--cursor", "qa"]);
    assert_eq!(
        (got.len(), &got[0]["message"], &got[0]["line_number"]),
        (1, &json!("eight"), &json!(3))
    );
    // A continuation line is not a place to cut.
    env.circe(["chat", "say", "--to", "qa"]).agent("engineer").stdin(b"a\nb\n").run().ok();
    env.circe(["chat", "archive", "--before", "5"]).run().code(3);
    // doctor accepts LOGS/chat/.
    env.circe(["doctor"]).run().ok();
}

/// A `chat watch` running in the background, its stdout read line by line.
struct Watcher {
    child: Child,
    rx: Receiver<String>,
}

impl Watcher {
    fn start(env: &Env, extra: &[&str]) -> Watcher {
        let mut child = Command::new(exe())
            .args(["chat", "watch"])
            .args(extra)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CIRCE_NOW", &env.now)
            .current_dir(env.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        // It watches before it reads: once its cursor is saved, it is ready.
        std::thread::sleep(Duration::from_millis(300));
        Watcher { child, rx }
    }

    #[track_caller]
    fn next(&self) -> Value {
        let l =
            self.rx.recv_timeout(Duration::from_secs(20)).expect("no line from chat watch in 20 s");
        lines(&l).remove(0)
    }

    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let out = self.child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

#[test]
fn watch_follows_a_replaced_and_a_truncated_file() {
    local_only!("the test replaces and truncates chat.md by hand");
    let env = Env::new();
    env.as_("engineer", &["chat", "say", "--to", "qa", "old"]).ok();
    let w = Watcher::start(&env, &["--cursor", "w"]);
    env.as_("engineer", &["chat", "say", "--to", "qa", "one"]).ok();
    assert_eq!(w.next()["message"], "one");
    env.circe(["chat", "say", "--to", "qa"]).agent("engineer").stdin(b"two\nlines\n").run().ok();
    assert_eq!(w.next()["message"], "two\nlines");
    // An editor saves by writing a new file and renaming it over the channel.
    let chat = env.root().join("chat.md");
    std::fs::write(env.root().join("new.md"), "[qa-to-engineer]: edited\n").unwrap();
    std::fs::rename(env.root().join("new.md"), &chat).unwrap();
    let v = w.next();
    assert_eq!((&v["message"], &v["line_number"]), (&json!("edited"), &json!(1)));
    // Truncated in place, then written again.
    std::fs::write(&chat, "").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    env.as_("engineer", &["chat", "say", "--to", "qa", "after"]).ok();
    let v = w.next();
    assert_eq!((&v["message"], &v["line_number"]), (&json!("after"), &json!(1)));
    let err = w.stop();
    assert!(err.contains("was replaced"), "{err}");
    assert!(err.contains("was truncated"), "{err}");
}

#[test]
fn watch_follows_an_archive_and_ends_on_sigterm_and_a_closed_pipe() {
    let env = Env::new();
    let w = Watcher::start(&env, &["--cursor", "w"]);
    env.as_("engineer", &["chat", "say", "--to", "qa", "one"]).ok();
    assert_eq!(w.next()["message"], "one");
    env.circe(["chat", "archive"]).run().ok();
    env.as_("engineer", &["chat", "say", "--to", "qa", "two"]).ok();
    assert_eq!(w.next()["message"], "two");
    // A second watcher on the same cursor is refused.
    env.circe(["chat", "watch", "--once", "--cursor", "w"]).run().code(4);
    // SIGTERM ends it; the cursor was saved after every line, so nothing repeats.
    let pid = w.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let _ = w.stop();
    assert!(once(&env, &["--cursor", "w"]).is_empty());
    // A reader that goes away ends the watcher with exit 0.
    let child = watch_without_reader(&env);
    std::thread::sleep(Duration::from_millis(300));
    env.as_("engineer", &["chat", "say", "--to", "qa", "nobody reads"]).ok();
    assert_eq!(exit_within_20s(child, "watch did not end on a closed pipe").code(), Some(0));
    // Even while nothing is said: it notices its reader gone within about a second.
    let idle = watch_without_reader(&env);
    assert_eq!(exit_within_20s(idle, "an idle watch did not see its reader go").code(), Some(0));
}

/// A routine archive is no removal: a watcher that wakes between its two renames (no file
/// at the path for a moment; `chat-archive-slow` holds that moment open on a local root)
/// follows on into the fresh channel without a note, losing and repeating nothing.
#[test]
fn a_watcher_follows_a_routine_archive_without_a_note() {
    let env = Env::new();
    let w = Watcher::start(&env, &["--cursor", "w"]);
    for round in ["one", "two", "three"] {
        env.as_("engineer", &["chat", "say", "--to", "qa", round]).ok();
        assert_eq!(w.next()["message"], round);
        env.circe(["chat", "archive"]).var("CIRCE_TEST_BREAK", "chat-archive-slow").run().ok();
    }
    env.as_("engineer", &["chat", "say", "--to", "qa", "four"]).ok();
    let v = w.next();
    assert_eq!((&v["message"], &v["line_number"]), (&json!("four"), &json!(1)));
    std::thread::sleep(Duration::from_millis(300));
    assert!(w.rx.try_recv().is_err(), "a line was repeated");
    let err = w.stop();
    assert!(!err.contains("note:"), "{err}");
    assert!(once(&env, &["--cursor", "w"]).is_empty());
}

/// A whole archive cut off between its renames (the channel moved, its fresh file not yet in
/// place) is no removal either: the watcher waits without a note, and the next `say` makes
/// the channel, read from its first line.
#[test]
fn a_watcher_waits_quietly_after_an_archive_cut_off_between_its_renames() {
    local_only!("crash points of the local engine's chat archive");
    let env = Env::new();
    let w = Watcher::start(&env, &["--cursor", "w"]);
    env.as_("engineer", &["chat", "say", "--to", "qa", "one"]).ok();
    assert_eq!(w.next()["message"], "one");
    env.circe(["chat", "archive"]).var("CIRCE_CRASH_AT", "chat.archived").run().code(86);
    assert!(!env.root().join("chat.md").exists());
    std::thread::sleep(Duration::from_millis(300));
    env.as_("engineer", &["chat", "say", "--to", "qa", "two"]).ok();
    let v = w.next();
    assert_eq!((&v["message"], &v["line_number"]), (&json!("two"), &json!(1)));
    let err = w.stop();
    assert!(!err.contains("note:"), "{err}");
}

/// `chat watch` whose standard output nobody reads (its pipe's reader closed at once).
fn watch_without_reader(env: &Env) -> std::process::Child {
    let mut child = Command::new(exe())
        .args(["chat", "watch"])
        .env_clear()
        .current_dir(env.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child
}

/// How `child` ended; `what` fails the test if it runs 20 s.
fn exit_within_20s(mut child: std::process::Child, what: &str) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn watch_can_poll_instead_of_inotify() {
    let env = Env::new();
    env.circe(["chat", "watch", "--poll", "0s"]).run().code(2);
    env.circe(["chat", "watch", "--poll", "soon"]).run().code(2);
    let w = Watcher::start(&env, &["--poll", "50ms"]);
    env.as_("engineer", &["chat", "say", "--to", "qa", "polled"]).ok();
    assert_eq!(w.next()["message"], "polled");
    let _ = w.stop();
}

/// A line another tool wrote with names containing `-to-` is split by the known agents
/// (and said to be ambiguous).
#[test]
fn names_containing_to_are_split_by_the_known_agents() {
    local_only!("the line is written into the channel's file by hand");
    let env = Env::new();
    for a in ["coder", "go-to-market"] {
        env.circe(["agent", "add", a, "--role", "engineer"]).run().ok();
    }
    std::fs::write(env.root().join("chat.md"), "[coder-to-go-to-market]: launch?\n").unwrap();
    let v = once(&env, &["--from-start"]);
    assert_eq!(
        (&v[0]["sender"], &v[0]["recipient"], &v[0]["ambiguous"]),
        (&json!("coder"), &json!("go-to-market"), &json!(true))
    );
}

/// `say` writes no line that the reference's regex (its last `-to-`) or circe's reader (the
/// known agents first) would give another sender or recipient.
#[test]
fn say_refuses_a_line_another_reader_would_split_otherwise() {
    let env = Env::new();
    for a in ["coder", "go-to-market"] {
        env.circe(["agent", "add", a, "--role", "engineer"]).run().ok();
    }
    let before = env.state();
    let o = env.as_("coder", &["chat", "say", "--to", "go-to-market", "launch?"]);
    o.code(3);
    assert!(o.stderr.contains("would read back as from coder-to-go to market"), "{}", o.stderr);
    assert_unchanged(&before, &env.state());
    // The other way round reads the same by both.
    env.as_("go-to-market", &["chat", "say", "--to", "coder", "ready"]).ok();
    // With agents on both sides of both splits, circe's own reader would split it so too.
    for a in ["coder-to-go", "market"] {
        env.circe(["agent", "add", a, "--role", "engineer"]).run().ok();
    }
    let before = env.state();
    let o = env.as_("coder", &["chat", "say", "--to", "go-to-market", "again"]);
    o.code(3);
    assert_unchanged(&before, &env.state());
}

/// A watcher with a cursor that starts before the channel has a file keeps "from the first
/// line" at once: stopped before any line, it resumes with every line said since.
#[test]
fn a_cursor_saved_before_the_channel_exists_reads_from_its_first_line() {
    let env = Env::new();
    assert!(once(&env, &["--cursor", "early"]).is_empty());
    env.as_("engineer", &["chat", "say", "--to", "all", "a"]).ok();
    env.as_("engineer", &["chat", "say", "--to", "all", "b"]).ok();
    let got = once(&env, &["--cursor", "early"]);
    let said: Vec<&str> = got.iter().map(|l| l["message"].as_str().unwrap()).collect();
    assert_eq!(said, ["a", "b"]);
    assert!(once(&env, &["--cursor", "early"]).is_empty(), "and on from there");
    // Saved before the channel, read after an archive: the archived lines too.
    let fresh = Env::new();
    assert!(once(&fresh, &["--cursor", "early"]).is_empty());
    fresh.as_("engineer", &["chat", "say", "--to", "all", "a"]).ok();
    fresh.circe(["chat", "archive"]).run().ok();
    fresh.as_("engineer", &["chat", "say", "--to", "all", "b"]).ok();
    let got = once(&fresh, &["--cursor", "early"]);
    let said: Vec<&str> = got.iter().map(|l| l["message"].as_str().unwrap()).collect();
    assert_eq!(said, ["a", "b"], "through the archive");
    // Through two archives (the second's file may take the inode the first channel file
    // had: the way on goes by the records, not by that number).
    let two = Env::new();
    assert!(once(&two, &["--cursor", "early"]).is_empty());
    let say = |t: &str| {
        two.as_("qa", &["chat", "say", "--to", "eagle", t]).ok();
    };
    ["m1", "m2", "m3"].into_iter().for_each(say);
    two.circe(["chat", "archive", "--before", "2"]).run().ok();
    ["m4", "m5"].into_iter().for_each(say);
    two.circe(["chat", "archive", "--before", "3"]).run().ok();
    let got = once(&two, &["--cursor", "early"]);
    let said: Vec<&str> = got.iter().map(|l| l["message"].as_str().unwrap()).collect();
    assert_eq!(said, ["m1", "m2", "m3", "m4", "m5"]);
}

/// Names as `send` takes them: `agent:NAME` is the agent; a role is refused (a line names
/// agents), with its agents spelled out as the hint, and nothing is written.
#[test]
fn chat_takes_agent_addresses_and_spells_out_a_role() {
    let env = Env::new();
    env.circe(["agent", "add", "dev2", "--role", "engineer"]).run().ok();
    let before = env.state();
    let o = env.as_("qa", &["chat", "say", "--to", "role:engineer", "hi"]);
    o.code(2);
    assert!(o.stderr.contains("--to dev2 --cc engineer"), "{}", o.show());
    assert_unchanged(&before, &env.state());
    env.as_("qa", &["chat", "say", "--to", "agent:engineer", "--cc", "agent:dev2", "hi"]).ok();
    let w = env.circe(["chat", "watch", "--once", "--from-start"]).run();
    assert!(w.stdout.contains("\"recipient\":\"engineer\""), "{}", w.show());
    assert!(w.stdout.contains("dev2"), "{}", w.show());
}

/// The messages `chat watch --once --cursor NAME` prints.
fn said_to(env: &Env, cursor: &str) -> Vec<String> {
    let got = once(env, &["--cursor", cursor]);
    got.iter().map(|l| l["message"].as_str().unwrap().to_string()).collect()
}

/// The inode number of `.circe/REL`.
fn ino(env: &Env, rel: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(env.root().join(rel)).unwrap().ino()
}

/// What the filesystem does when it gives the number of a file that is gone (`from`) to a
/// later one (`to`), as it may once `chat archive --before` replaced the channel file: the
/// cursor `w` and the records' old files that named `from` name `to`.
fn renumber(env: &Env, from: u64, to: u64) {
    let retag = |v: &mut Value| {
        if v["ino"] == json!(from) {
            v["ino"] = json!(to);
        }
    };
    let mut c: Value = serde_json::from_str(&env.read("cursors/chat/w")).unwrap();
    retag(&mut c);
    std::fs::write(env.root().join("cursors/chat/w"), format!("{c}\n")).unwrap();
    for n in env.ls_all("LOGS/chat") {
        let Some(stem) = n.strip_suffix(".json") else { continue };
        let rel = format!("LOGS/chat/{stem}.json");
        let mut r: Value = serde_json::from_str(&env.read(&rel)).unwrap();
        retag(&mut r["old"]);
        std::fs::write(env.root().join(&rel), r.to_string()).unwrap();
    }
}

/// `engineer` says `text` to qa.
fn say_to_qa(env: &Env, text: &str) {
    env.as_("engineer", &["chat", "say", "--to", "qa", text]).ok();
}

/// A root where cursor `w` read A and B, then C, D and E were said and `chat archive
/// --before 4` took A, B and C (D and E stay the channel); with the inode number of the
/// file the split replaced when `reused` (for `renumber`), else 0.
fn read_then_split(reused: bool) -> (Env, u64) {
    let env = Env::new();
    for t in ["A", "B"] {
        say_to_qa(&env, t);
    }
    assert_eq!(once(&env, &["--cursor", "w", "--from-start"]).len(), 2);
    let first = if reused { ino(&env, "chat.md") } else { 0 };
    for t in ["C", "D", "E"] {
        say_to_qa(&env, t);
    }
    env.circe(["chat", "archive", "--before", "4"]).run().ok();
    (env, first)
}

/// A cursor saved before a split archive (`--before`) and resumed after a whole one loses
/// nothing, also when the new channel of the whole archive has the number (inode) of the
/// file the split replaced: the cursor's bytes are not in that file, so the way on goes by
/// the records.
#[test]
fn a_cursor_goes_on_through_a_split_archive_and_a_whole_one() {
    for reused in [false, true] {
        if reused {
            local_only!("the test renumbers the chat files by hand");
        }
        let (env, first) = read_then_split(reused);
        let say = |t: &str| say_to_qa(&env, t);
        say("F");
        env.circe(["chat", "archive"]).run().ok();
        say("G");
        if reused {
            renumber(&env, first, ino(&env, "chat.md"));
        }
        assert_eq!(said_to(&env, "w"), ["C", "D", "E", "F", "G"], "reused: {reused}");
        assert!(said_to(&env, "w").is_empty(), "reused: {reused}");
    }
}

/// The same read once between the archives, and through a chain of one split and two whole
/// archives, the second of which takes the file that has the split file's number.
#[test]
fn a_cursor_goes_on_through_a_chain_of_archives_after_a_split() {
    for reused in [false, true] {
        if reused {
            local_only!("the test renumbers the chat files by hand");
        }
        // Read once after the split archive.
        let (env, first) = read_then_split(reused);
        let say = |t: &str| say_to_qa(&env, t);
        assert_eq!(said_to(&env, "w"), ["C", "D", "E"], "reused: {reused}");
        say("F");
        env.circe(["chat", "archive"]).run().ok();
        say("G");
        if reused {
            renumber(&env, first, ino(&env, "chat.md"));
        }
        assert_eq!(said_to(&env, "w"), ["F", "G"], "reused: {reused}");
        // Not read between: split, whole, whole; the file the split replaced has its number
        // given to the channel the first whole archive made, which the second archives.
        let (env, first) = read_then_split(reused);
        let say = |t: &str| say_to_qa(&env, t);
        say("F");
        env.circe(["chat", "archive"]).run().ok();
        say("G");
        let second = if reused { ino(&env, "chat.md") } else { 0 };
        env.circe(["chat", "archive"]).run().ok();
        say("H");
        if reused {
            renumber(&env, first, second);
        }
        assert_eq!(said_to(&env, "w"), ["C", "D", "E", "F", "G", "H"], "reused: {reused}");
    }
}
