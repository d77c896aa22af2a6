//! `chat say` from several processes at once on one database root: every message lands
//! whole and once, and the channel's order is the order of its ids (each message's line
//! number follows the one before it with no gap and no overlap, and `chat.md` in a mirror
//! is the messages in that order). Shown failing when an append reads the channel's head
//! without its lock (`pg-chat-race`): two appends take one id, or one place.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::caught::until_caught;
use crate::common::{Out, Root};

/// The two-line text writer `w` says as its `k`-th message.
fn text(w: usize, k: usize) -> String {
    format!("w{w} m{k}\nline two of w{w} m{k}")
}

/// `writers` agents say `each` messages each, all at once; returns what is wrong.
fn storm(url: &str, writers: usize, each: usize, brk: Option<&str>) -> Vec<String> {
    let mut root = Root::new(url, "client", writers);
    if let Some(b) = brk {
        root.env.push(("CIRCE_TEST_BREAK".into(), b.into()));
    }
    let mut problems = Vec::new();
    let failed: Vec<String> = std::thread::scope(|s| {
        let root = &root;
        let handles: Vec<_> = (1..=writers)
            .map(|w| {
                s.spawn(move || {
                    let mut bad = Vec::new();
                    for k in 0..each {
                        let agent = format!("e{w}");
                        let mut c = root.command(Some(&agent), &["chat", "say", "--to", "all"]);
                        c.stdin(Stdio::piped());
                        let mut child = c.spawn().expect("spawn circe");
                        let mut stdin = child.stdin.take().expect("stdin");
                        stdin.write_all(text(w, k).as_bytes()).expect("write stdin");
                        drop(stdin);
                        let o = Out::from(&child.wait_with_output().expect("wait"));
                        if o.code != 0 {
                            bad.push(format!("e{w} message {k}: exit {}: {}", o.code, o.stderr));
                        }
                    }
                    bad
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("writer")).collect()
    });
    problems.extend(failed);
    let watch = Root::at(url).run(None, &["chat", "watch", "--once", "--from-start"]);
    watch.ok();
    let got: Vec<Value> = watch.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut expect_line = 1;
    let mut channel = String::new();
    for v in &got {
        let (msg, sender) =
            (v["message"].as_str().unwrap_or(""), v["sender"].as_str().unwrap_or(""));
        *seen.entry(msg.to_string()).or_default() += 1;
        if v["line_number"].as_u64() != Some(expect_line) {
            problems
                .push(format!("`{msg}` at line {} where {expect_line} was next", v["line_number"]));
        }
        expect_line = v["line_number"].as_u64().unwrap_or(0) + 2;
        let mut lines = msg.lines();
        channel.push_str(&format!("[{sender}-to-all]: {}\n", lines.next().unwrap_or("")));
        for l in lines {
            channel.push_str(&format!("  {l}\n"));
        }
    }
    for w in 1..=writers {
        for k in 0..each {
            let n = seen.get(&text(w, k)).copied().unwrap_or(0);
            if n != 1 {
                problems.push(format!("e{w} message {k} read {n} times"));
            }
        }
    }
    if seen.len() != writers * each {
        problems.push(format!("{} messages read, {} said", seen.len(), writers * each));
    }
    let dir = tempfile::tempdir().unwrap();
    let mirror = dir.path().join("m");
    Root::at(url).run(None, &["mirror", mirror.to_str().unwrap()]).ok();
    let file = std::fs::read_to_string(mirror.join("chat.md")).unwrap_or_default();
    if file != channel {
        problems.push("the mirror's chat.md is not the messages in their order".into());
    }
    problems
}

#[test]
fn concurrent_says_land_whole_once_and_in_id_order() {
    let c = need_pg!();
    let bad = storm(&c.fresh_url(), 4, 8, None);
    assert!(bad.is_empty(), "the chat channel lost or tore messages: {bad:?}");
}

/// The checker sees appends that take the head without its lock.
#[test]
#[should_panic(expected = "the chat channel lost or tore messages")]
fn the_chat_checker_sees_an_unlocked_head() {
    let Some(c) = crate::common::cluster() else {
        panic!("the chat channel lost or tore messages (skipped: no PostgreSQL)")
    };
    let bad = until_caught("pg chat checker", 3, Duration::from_secs(60), |_| {
        storm(&c.fresh_url(), 4, 5, Some("pg-chat-race"))
    });
    assert!(bad.is_empty(), "the chat channel lost or tore messages: {bad:?}");
}

/// `circe migrate` carries the channel and its archives: a watcher from the start prints
/// the same lines, and the mirror holds the same files.
#[test]
fn migrate_carries_the_channel_and_its_archives() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    let run = |agent: Option<&str>, args: &[&str], stdin: Option<&str>| {
        let mut cmd = std::process::Command::new(crate::common::BIN);
        cmd.args(args)
            .current_dir(project.path())
            .env_clear()
            .env("CIRCE_NOW", "2025-11-21T17:00:00Z")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(a) = agent {
            cmd.env("CIRCE_AGENT", a);
        }
        let mut child = cmd.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
        drop(input);
        Out::from(&child.wait_with_output().unwrap())
    };
    run(None, &["init"], None).ok();
    for t in ["one", "two"] {
        run(Some("engineer"), &["chat", "say", "--to", "qa", t], None).ok();
    }
    run(Some("qa"), &["chat", "say", "--to", "engineer"], Some("three\n  indented\n")).ok();
    run(None, &["chat", "archive", "--before", "2"], None).ok();
    run(Some("engineer"), &["chat", "say", "--to", "qa", "four"], None).ok();
    // A hand edit: a comment and a line without its newline.
    let chat = project.path().join(".circe/chat.md");
    let mut text = std::fs::read_to_string(&chat).unwrap();
    text.push_str("# a note\n[qa-to-engineer]: by hand");
    std::fs::write(&chat, &text).unwrap();
    text.push('\n');
    let before = run(None, &["chat", "watch", "--once", "--from-start"], None);
    before.ok();
    let logs = project.path().join(".circe/LOGS/chat");
    let archive = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| std::path::Path::new(n).extension().is_some_and(|e| e == "md"))
        .unwrap();
    let archived = std::fs::read_to_string(logs.join(&archive)).unwrap();
    run(None, &["migrate", "--to", &c.fresh_url(), "--clock", "client"], None).ok();
    let after = run(None, &["chat", "watch", "--once", "--from-start"], None);
    // The same, and the last line is whole now: it got its newline.
    assert_eq!(before.stdout.lines().count(), 3, "{}", before.stdout);
    let (old, new): (Vec<&str>, Vec<&str>) =
        (before.stdout.lines().collect(), after.ok().stdout.lines().collect());
    assert_eq!((&new[..3], new.len()), (&old[..], 4), "{}", after.stdout);
    assert!(new[3].contains("\"message\":\"by hand\",\"line_number\":6"), "{}", new[3]);
    let mirror = project.path().join("mirror");
    run(None, &["mirror", mirror.to_str().unwrap()], None).ok();
    assert_eq!(std::fs::read_to_string(mirror.join("chat.md")).unwrap(), text);
    let moved = std::fs::read_to_string(mirror.join("LOGS/chat").join(&archive)).unwrap();
    assert_eq!(moved, archived);
    // The database numbers on from the migrated channel.
    run(Some("engineer"), &["chat", "say", "--to", "qa", "five"], None).ok();
    let last = run(None, &["--json", "chat", "watch", "--once", "--from-start"], None);
    let v: Value = serde_json::from_str(last.stdout.lines().last().unwrap()).unwrap();
    assert_eq!((&v["message"], v["line_number"].as_u64()), (&Value::from("five"), Some(7)));
}

/// A NUL byte put into chat.md by hand (`chat say` refuses one): `migrate --to` names the
/// file and its line and moves nothing (the server refused the text, naming neither).
#[test]
fn migrate_names_a_nul_byte_in_the_channel_and_moves_nothing() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    let run = |args: &[&str], stdin: &str| {
        let mut cmd = std::process::Command::new(crate::common::BIN);
        cmd.args(args)
            .current_dir(project.path())
            .env_clear()
            .env("CIRCE_AGENT", "coordinator")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        crate::common::Out::from(&child.wait_with_output().unwrap())
    };
    run(&["init"], "").ok();
    run(&["chat", "say", "--to", "engineer"], "first\n").ok();
    run(&["chat", "say", "--to", "engineer"], "hello there\n").ok();
    let chat = project.path().join(".circe/chat.md");
    let text = std::fs::read_to_string(&chat).unwrap();
    let line = 1 + text.lines().position(|l| l.contains("hello there")).unwrap();
    std::fs::write(&chat, text.replace("hello there", "hel\0lo there")).unwrap();
    let o = run(&["migrate", "--to", &c.fresh_url()], "");
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("chat.md line {line} holds a NUL byte")), "{}", o.stderr);
    run(&["tasks"], "").ok();
}

/// A channel kept elsewhere (`chat: path:`) comes back there from the database: what was
/// said on the database is read as the channel after `migrate --to-local` (it was written
/// to `.circe/chat.md`, and the old file was the channel again), and the old file is set
/// aside, not overwritten.
#[test]
fn a_channel_kept_elsewhere_comes_back_where_the_configuration_names_it() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = std::process::Command::new(crate::common::BIN)
            .args(args)
            .current_dir(project.path())
            .env_clear()
            .env("CIRCE_AGENT", "qa")
            .output()
            .unwrap();
        crate::common::Out::from(&o)
    };
    run(&["init"]).ok();
    let cfg = project.path().join(".circe/circe.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("registry:", "chat:\n  path: team/chat.md\nregistry:"))
        .unwrap();
    std::fs::create_dir(project.path().join("team")).unwrap();
    run(&["chat", "say", "--to", "all", "line one"]).ok();
    run(&["migrate", "--to", &c.fresh_url()]).ok();
    run(&["chat", "say", "--to", "all", "line two"]).ok();
    run(&["migrate", "--to-local", "."]).ok();
    let watched = run(&["chat", "watch", "--from-start", "--once"]);
    watched.ok();
    assert!(watched.stdout.contains("line two"), "{}", watched.stdout);
    assert!(project.path().join("team/chat.md.before-migrate").is_file());
}
