//! `circe mirror` after quiescence is byte-equal to a local root that ran the same commands
//! (pinned clock, the same message ids), and `circe migrate` moves a root both ways.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::{BIN, Out};

/// The script: (clock, agent, arguments).
const SCRIPT: &[(&str, &str, &str)] = &[
    (
        "17:00:00",
        "coordinator",
        "send --to all --intent implement_feature --task M-1 --summary a --msg-id 20251121T170000000Z-aaaaaaa1",
    ),
    (
        "17:00:30",
        "coordinator",
        "send --to all --intent fix_bug --task M-2 --summary b --priority high --msg-id 20251121T170030000Z-aaaaaaa2",
    ),
    ("17:01:00", "engineer", "claim M-1"),
    ("17:02:00", "engineer", "status M-1 in_progress --note go"),
    ("17:03:00", "engineer", "take M-1"),
    ("17:04:00", "engineer", "check M-1 --run tests_passed -- true"),
    ("17:05:00", "engineer", "heartbeat M-1 --ttl 45m"),
    (
        "17:06:00",
        "engineer",
        "send --to qa --intent test --task M-1 --summary pls --msg-id 20251121T170600000Z-aaaaaaa3",
    ),
    ("17:07:00", "engineer", "done M-1"),
    ("17:08:00", "qa", "claim M-1"),
    ("17:09:00", "qa", "status M-1 in_progress"),
    ("17:10:00", "qa", "check M-1 tests_passed=true"),
    ("17:11:00", "qa", "status M-1 completed"),
    ("17:12:00", "engineer", "claim --next"),
    ("17:13:00", "engineer", "release M-2 --reason later"),
    (
        "17:14:00",
        "engineer",
        "send --to coordinator --intent status_update --summary hi --msg-id 20251121T171400000Z-aaaaaaa4",
    ),
    ("17:14:30", "engineer", "chat say --to qa --cc coordinator ready for review"),
    ("17:14:40", "qa", "chat say --seq --to engineer looking"),
    ("17:15:00", "qa", "done M-1"),
    ("17:16:00", "engineer", "claim M-2 --ttl 5m"),
];

/// What TX adds (section 16), played after `SCRIPT`: asks (answered, and expired by
/// `reap`), a prompt, tasks with deadlines (`claim --next` takes the earliest; one lapses),
/// a routing rule firing on a move, a task-complete (its outbox), a retirement, and the
/// readdress of the orphaned task. Message files are (name, text) written into the project.
const TX_FILES: &[(&str, &str)] = &[
    ("tx.yaml", "routing:\n  brain:\n    in-progress: {qa: brain started}\n"),
    (
        "ask1.md",
        "---\nto: brain\ntype: ask\nmsg-id: ask-1\nheadline: Which branch?\ndeadline: 2025-11-21T19:00:00Z\n---\nWhich one?\n",
    ),
    (
        "answer1.md",
        "---\nto: coordinator\ntype: ask-response\nin-reply-to: ask-1\nmsg-id: ans-1\n---\nmain\n",
    ),
    (
        "ask2.md",
        "---\nto: qa\ntype: ask\nmsg-id: ask-2\ndeadline: 2025-11-21T17:40:00Z\n---\nReady?\n",
    ),
    ("prompt.md", "---\nto: brain\nfrom: system\ntype: prompt\nmsg-id: p-1\n---\nYou are brain.\n"),
    (
        "task1.md",
        "---\nto: brain\ntype: task\nmsg-id: tx-1\ndeadline: 2025-11-21T19:00:00Z\n---\nlate one\n",
    ),
    (
        "task2.md",
        "---\nto: brain\ntype: task\nmsg-id: tx-2\ndeadline: 2025-11-21T17:45:00Z\n---\nearly one\n",
    ),
    (
        "done1.md",
        "---\nto: coordinator\ntype: task-complete\ntask-id: tx-1\nmsg-id: done-1\n---\ndone\n",
    ),
    ("task3.md", "---\nto: brain\ntype: task\nmsg-id: tx-3\n---\nthird\n"),
];

const TX_SCRIPT: &[(&str, &str, &str)] = &[
    ("17:20:00", "coordinator", "agent add brain --role engineer"),
    ("17:20:30", "coordinator", "config --set tx.yaml"),
    ("17:21:00", "coordinator", "send --file ask1.md"),
    ("17:22:00", "brain", "send --file answer1.md"),
    ("17:23:00", "coordinator", "send --file ask2.md"),
    ("17:24:00", "coordinator", "send --file prompt.md"),
    ("17:25:00", "coordinator", "send --file task1.md"),
    ("17:26:00", "coordinator", "send --file task2.md"),
    ("17:27:00", "brain", "claim --next"),
    ("17:28:00", "brain", "status tx-2 in_progress"),
    ("17:50:00", "coordinator", "reap"),
    ("17:51:00", "brain", "claim tx-1"),
    ("17:52:00", "brain", "status tx-1 in_progress"),
    ("17:53:00", "brain", "send --file done1.md"),
    ("17:54:00", "coordinator", "send --file task3.md"),
    ("17:55:00", "brain", "claim tx-3"),
    ("17:56:00", "coordinator", "agent retire brain"),
    ("17:57:00", "coordinator", "orphans redeliver tx-3 --to engineer"),
];

/// Run the script in `project` (a root is there already).
fn play(project: &Path, extra: Option<&str>) {
    play_steps(project, SCRIPT, extra);
}

/// Run `SCRIPT`, then `TX_SCRIPT` with its files.
fn play_tx(project: &Path) {
    play_steps(project, SCRIPT, None);
    let config = Command::new(BIN).arg("config").current_dir(project).env_clear().output().unwrap();
    let config = String::from_utf8(Out::from(&config).ok().stdout.clone().into_bytes()).unwrap();
    for (name, text) in TX_FILES {
        // tx.yaml: the root's configuration with the routing rule added.
        let text = if *name == "tx.yaml" { format!("{config}{text}") } else { (*text).to_string() };
        std::fs::write(project.join(name), text).unwrap();
    }
    play_steps(project, TX_SCRIPT, None);
}

fn play_steps(project: &Path, script: &[(&str, &str, &str)], extra: Option<&str>) {
    let mut steps: Vec<(String, String, String)> = script
        .iter()
        .map(|(t, a, s)| ((*t).to_string(), (*a).to_string(), (*s).to_string()))
        .collect();
    if let Some(x) = extra {
        steps.push(("17:20:00".into(), "engineer".into(), x.to_string()));
    }
    for (t, agent, args) in steps {
        let out = Command::new(BIN)
            .args(args.split(' '))
            .current_dir(project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CIRCE_AGENT", &agent)
            .env("CIRCE_NOW", format!("2025-11-21T{t}Z"))
            .output()
            .unwrap();
        Out::from(&out).ok();
    }
}

/// Every file under `dir` with its bytes (folders as `/`), circe's private folders left out.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if ["locks", "queue", "tmp", ".circe-mirror"].contains(&rel.as_str()) {
                continue;
            }
            if p.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[track_caller]
fn assert_same(local: &BTreeMap<String, Vec<u8>>, mirror: &BTreeMap<String, Vec<u8>>) {
    let mut diff = Vec::new();
    for (k, v) in local {
        match mirror.get(k) {
            None => diff.push(format!("missing {k}")),
            Some(w) if untimed(w) != untimed(v) => diff.push(format!("differs {k}")),
            _ => {}
        }
    }
    diff.extend(mirror.keys().filter(|k| !local.contains_key(*k)).map(|k| format!("extra {k}")));
    assert!(diff.is_empty(), "the mirror is not the local root:\n{}", diff.join("\n"));
}

fn init(project: &Path, url: Option<&str>) {
    let mut c = Command::new(BIN);
    c.arg("init").current_dir(project).env_clear().env("CIRCE_NOW", "2025-11-21T17:00:00Z");
    if let Some(u) = url {
        c.args(["--engine", u, "--clock", "client"]);
    }
    Out::from(&c.output().unwrap()).ok();
}

/// The bytes with every run check's duration (`"seconds":N` in an event) set to 0: how long
/// `true` took to run is the one thing two runs of the script do not share.
fn untimed(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_ref();
    while let Some(i) = rest.find("\"seconds\":") {
        let (head, tail) = rest.split_at(i + "\"seconds\":".len());
        out.push_str(head);
        out.push('0');
        rest = tail
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == 'e' || c == '-');
    }
    out.push_str(rest);
    out.into_bytes()
}

/// The same script on a local root and a database root; returns both trees.
fn both(
    url: &str,
    extra_on_pg: Option<&str>,
) -> (BTreeMap<String, Vec<u8>>, BTreeMap<String, Vec<u8>>) {
    both_with(url, &|p| play(p, None), &|p| play(p, extra_on_pg))
}

/// `both`, each root played by its own function.
fn both_with(
    url: &str,
    on_local: &dyn Fn(&Path),
    on_pg: &dyn Fn(&Path),
) -> (BTreeMap<String, Vec<u8>>, BTreeMap<String, Vec<u8>>) {
    let (local, pg) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    init(local.path(), None);
    init(pg.path(), Some(url));
    on_local(local.path());
    on_pg(pg.path());
    let mirror = pg.path().join("mirror");
    let out = Command::new(BIN)
        .arg("mirror")
        .arg(&mirror)
        .current_dir(pg.path())
        .env_clear()
        .output()
        .unwrap();
    Out::from(&out).ok();
    (tree(&local.path().join(".circe")), tree(&mirror))
}

#[test]
fn the_mirror_is_byte_equal_to_a_local_root_that_ran_the_same_commands() {
    let c = need_pg!();
    let (local, mirror) = both(&c.fresh_url(), None);
    assert!(
        local.keys().any(|k| std::path::Path::new(k).extension().is_some_and(|e| e == "owner")),
        "the script leaves a held task"
    );
    assert!(local.contains_key("LOGS/events.jsonl"));
    assert_same(&local, &mirror);
}

/// Message ids circe makes itself (`YYYYMMDDTHHMMSSmmmZ-` and 8 random characters: a routed
/// update, a notice, an expired ask's notice) replaced by `[ID]`: the rest is compared byte
/// for byte.
fn mask_ids(tree: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    let is_id = |w: &[u8]| {
        w.len() == 28
            && w[..8].iter().all(u8::is_ascii_digit)
            && w[8] == b'T'
            && w[9..18].iter().all(u8::is_ascii_digit)
            && w[18] == b'Z'
            && w[19] == b'-'
            && w[20..].iter().all(u8::is_ascii_alphanumeric)
    };
    let mask = |b: &[u8]| {
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b.len() - i >= 28 && is_id(&b[i..i + 28]) {
                out.extend_from_slice(b"[ID]");
                i += 28;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    };
    tree.iter().map(|(k, v)| (k.clone(), mask(v))).collect()
}

/// With TX state (asks, prompts, deadlines, routing, outboxes, retirement, orphans) too: the
/// mirror is the local root, byte for byte but for the ids circe makes itself.
#[test]
fn the_mirror_keeps_tx_state_as_a_local_root_does() {
    let c = need_pg!();
    let (local, mirror) = both_with(&c.fresh_url(), &play_tx, &play_tx);
    for k in ["ASKS/ask-1.ask", "ASKS/ask-2.ask", "AGENTS/brain/prompt.md", "TASKS/tx-2.status"] {
        assert!(local.contains_key(k), "the TX script leaves {k}");
    }
    let text = |k: &str| String::from_utf8_lossy(&local[k]).into_owned();
    assert!(text("ASKS/ask-2.ask").contains("state: expired"), "{}", text("ASKS/ask-2.ask"));
    assert!(text("TASKS/tx-2.status").contains("status: expired"));
    assert!(text("TASKS/tx-1.status").contains("status: completed"));
    assert!(text("TASKS/tx-3.status").contains("to: agent:engineer"), "readdressed to the agent");
    assert!(text("AGENTS/brain/agent.yaml").contains("retired_at:"));
    let routed = text("LOGS/events.jsonl").matches("\"event\":\"route\"").count();
    assert_eq!(routed, 2, "the rule fired on both moves to in_progress");
    assert_same(&mask_ids(&local), &mask_ids(&mirror));
}

/// The comparison fails when the database root ran one command more.
#[test]
#[should_panic(expected = "the mirror is not the local root")]
fn the_mirror_checker_sees_one_command_more() {
    let Some(c) = crate::common::cluster() else {
        panic!("the mirror is not the local root (skipped: no PostgreSQL)")
    };
    let (local, mirror) = both(&c.fresh_url(), Some("heartbeat M-2"));
    assert_same(&local, &mirror);
}

#[test]
fn migrate_moves_a_root_into_the_database_and_back() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    init(project.path(), None);
    play_tx(project.path());
    let run = |args: &[&str]| {
        Out::from(
            &Command::new(BIN).args(args).current_dir(project.path()).env_clear().output().unwrap(),
        )
    };
    // A consumer that handed on every event so far, its hook failing on each `open` (set
    // aside), and one event it has not handed on yet: it goes on there after the move.
    let hook = ["watch", "--cursor", "hook", "--all", "--once"];
    run(&[
        &hook[..],
        &["--from-start", "--kind", "open", "--exec", "false", "--max-attempts", "1"],
    ]
    .concat())
    .ok();
    run(&["send", "--agent", "coordinator", "--to", "qa", "--intent", "inform", "--summary", "n"])
        .ok();
    let before = tree(&project.path().join(".circe"));
    assert!(before.contains_key("ASKS/ask-1.ask"), "TX state goes along");
    assert!(before.contains_key("cursors/events/hook"), "{:?}", before.keys());
    assert!(before.contains_key("dead/hook.jsonl"), "{:?}", before.keys());
    // (after, behind, dead letters) of the consumer.
    let place = || {
        let o = run(&["cursors", "--json"]);
        let v = o.ok().json();
        let c = &v["cursors"][0];
        assert_eq!(c["name"], "hook", "{v}");
        (c["after"].as_u64(), c["behind"].as_u64(), c["dead_letters"].as_u64())
    };
    let was = place();
    assert_eq!(was.1, Some(1), "one event not handed on yet: {was:?}");
    assert!(was.2.is_some_and(|n| n > 0), "{was:?}");
    let url = c.fresh_url();
    run(&["migrate", "--to", &url, "--clock", "client"]).ok();
    assert_eq!(place(), was, "the consumer goes on where it was");
    assert!(
        project.path().join(".circe.migrated/MIGRATED.txt").is_file(),
        "the old folder is kept, with a note"
    );
    assert!(!project.path().join(".circe.migrated/circe.yaml").exists(), "and no longer a root");
    let mirror = project.path().join("mirror");
    run(&["mirror", mirror.to_str().unwrap()]).ok();
    assert_same(&before, &tree(&mirror));
    run(&["doctor"]).ok();
    let asks = run(&["asks", "--all", "--json"]);
    assert_eq!(asks.ok().json()["asks"].as_array().map(Vec::len), Some(2), "{}", asks.stdout);
    let orphans = run(&["orphans", "--json"]).json();
    let kept = orphans["messages"].as_array().cloned().unwrap_or_default();
    assert!(!kept.is_empty() && kept.iter().all(|m| m["agent"] == "brain"), "{orphans}");
    // Not into the project's own .circe: the root would land inside it.
    let own = project.path().join(".circe");
    let inner = run(&["migrate", "--to-local", own.to_str().unwrap()]);
    assert_eq!(inner.code, 2, "{}", inner.stderr);
    assert!(
        inner.stderr.contains("own folder") && inner.stderr.contains("writes"),
        "{}",
        inner.stderr
    );
    assert!(!own.join(".circe").exists(), "nothing was written");
    let deeper = run(&["migrate", "--to-local", own.join("AGENTS").to_str().unwrap()]);
    assert_eq!(deeper.code, 2, "{}", deeper.stderr);
    assert!(deeper.stderr.contains("lies inside the root folder"), "{}", deeper.stderr);
    run(&["tasks"]).ok();
    // And back into a folder of its own.
    let back = project.path().join("back");
    let moved = run(&["migrate", "--to-local", "back"]); // relative to the project
    assert!(moved.ok().stdout.contains("still names the database"), "{}", moved.stdout);
    let after = tree(&back.join(".circe"));
    assert_same(&before, &after);
    let back_place = Out::from(
        &Command::new(BIN)
            .args(["cursors", "--json"])
            .current_dir(&back)
            .env_clear()
            .output()
            .unwrap(),
    );
    assert_eq!(back_place.ok().json()["cursors"][0]["after"].as_u64(), was.0);
    let refused = run(&["tasks"]);
    assert_eq!(refused.code, 3, "the database root is marked moved");
    let place = back.join(".circe").display().to_string();
    assert!(refused.stderr.contains(&place), "names the new place whole: {}", refused.stderr);
    let local = Out::from(
        &Command::new(BIN)
            .args(["--root", back.to_str().unwrap(), "doctor"])
            .env_clear()
            .output()
            .unwrap(),
    );
    local.ok();
}

#[test]
fn mirror_watch_follows_new_events() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("m");
    let mut watch = crate::common::mirror_second_round(&root, &target);
    root.open_tasks(1);
    let status = watch.wait().unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_dir(target.join("NEW_MESSAGES")).unwrap().count(),
        1,
        "the new task's message was mirrored"
    );
}

#[test]
fn doctor_reports_a_message_missing_from_its_box() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(2);
    root.run(None, &["doctor"]).ok();
    let schema = url.rsplit("schema=").next().unwrap();
    c.psql(&format!("DELETE FROM \"{schema}\".messages WHERE file LIKE '%T-001%'"));
    c.psql(&format!("UPDATE \"{schema}\".feed SET last = last + 1"));
    let out = root.run(None, &["doctor", "--json"]);
    assert_eq!(out.code, 1);
    let v = out.json();
    let found: Vec<u64> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["invariant"].as_u64().unwrap())
        .collect();
    assert!(found.contains(&4), "{v}");
    assert!(found.contains(&7), "{v}");
    assert!(out.stdout.contains("nor in any other box"), "{}", out.stdout);
    // A command on it says it is in no box, exit 5, as on a folder root (it was exit 4
    // with a hint that doctor says where it is).
    let claim = root.run(Some("e1"), &["claim", "T-001"]);
    assert_eq!(claim.code, 5, "{claim:?}");
    assert!(claim.stderr.contains("the message of task T-001 is in no box"), "{claim:?}");
    // One moved into another box by hand: exit 4, saying where.
    c.psql(&format!(
        "UPDATE \"{schema}\".messages SET box = 'logs' WHERE file LIKE '%T-000%' AND box = 'new'"
    ));
    let claim = root.run(Some("e1"), &["claim", "T-000"]);
    assert_eq!(claim.code, 4, "{claim:?}");
    assert!(claim.stderr.contains("is not in NEW_MESSAGES but in logs"), "{claim:?}");
    let out = root.run(None, &["doctor"]);
    assert!(out.stderr.contains("is not in new but in logs"), "{out:?}");
}

/// A database root with messages in the boxes of an agent it does not have is not moved
/// into a folder (they would be left behind): refused, nothing written, the root still in
/// use; once the agent is there, the move goes, the unparseable message along with it.
#[test]
fn migrate_to_local_refuses_a_damaged_root() {
    let c = need_pg!();
    let root = root_with_row(c, "inbox:ghost", "x.md", "hello");
    let dir = tempfile::tempdir().unwrap();
    let back = dir.path().join("back");
    let out = root.run(None, &["migrate", "--to-local", back.to_str().unwrap()]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("no agent ghost") && out.stderr.contains("agent add"), "{out:?}");
    assert!(!back.exists(), "nothing was written");
    root.run(None, &["tasks"]).ok();
    root.run(None, &["agent", "add", "ghost", "--role", "qa"]).ok();
    root.run(None, &["migrate", "--to-local", back.to_str().unwrap()]).ok();
    let found: Vec<_> = walkdir(&back);
    let kept = found.iter().any(|p| p.to_string_lossy().ends_with("ghost~x.md"));
    assert!(kept, "nothing left behind (the unparseable one in quarantine): {found:?}");
}

/// A waiting task whose message row was removed in SQL reads, in a folder, as a send cut
/// off before its delivery, which the folder's repair rolls back: the move said "2 tasks"
/// and the folder held one. It is refused instead, naming the task, and the root stays.
#[test]
fn migrate_to_local_refuses_a_root_whose_task_lost_its_message() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(2);
    let schema = url.rsplit("schema=").next().unwrap();
    c.psql(&format!("DELETE FROM \"{schema}\".messages WHERE file LIKE '%T-001%'"));
    let dir = tempfile::tempdir().unwrap();
    let back = dir.path().join("back");
    let out = root.run(None, &["migrate", "--to-local", back.to_str().unwrap()]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stderr.contains("would not survive the move: T-001"), "{out:?}");
    assert!(!back.join(".circe").exists(), "the folder became a root");
    let tasks = root.run(None, &["tasks", "--json"]);
    assert_eq!(tasks.ok().json()["tasks"].as_array().map(Vec::len), Some(2), "{tasks:?}");
}

/// A fresh database root with one message row put in by hand (`box`, `file`, `body`).
fn root_with_row(
    c: &crate::pg_cluster::Cluster,
    mailbox: &str,
    file: &str,
    body: &str,
) -> crate::common::Root {
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = crate::common::Root::new(&url, "server", 1);
    c.psql(&format!(
        "INSERT INTO \"{schema}\".messages (box, file, body) VALUES ('{mailbox}', '{file}', convert_to('{body}', 'UTF8'))"
    ));
    root
}

fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() { stack.push(p) } else { out.push(p) }
        }
    }
    out
}

/// A message row whose file name is no plain name (`../` in it) is never written outside
/// the folder: doctor names it (invariant 2), and a mirror or a move into a folder refuse
/// it before writing anything.
#[test]
fn a_row_whose_name_climbs_out_is_never_written_outside() {
    let c = need_pg!();
    let body = "# MESSAGE\nfrom: coordinator\nto: qa\nintent: inform\ncreated_at: 2025-01-01T00:00:00Z\n\nx\n";
    let root = root_with_row(c, "inbox:qa", "../../escape.md", body);
    let doc = root.run(None, &["doctor"]);
    assert!(doc.code == 1 && doc.stderr.contains("invariant 2"), "{doc:?}");
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m");
    let out = root.run(None, &["mirror", m.to_str().unwrap()]);
    assert_eq!(out.code, 3, "{out:?}");
    let back = dir.path().join("back");
    let out = root.run(None, &["migrate", "--to-local", back.to_str().unwrap()]);
    assert_eq!(out.code, 3, "{out:?}");
    let found = walkdir(dir.path());
    assert!(found.is_empty(), "nothing written: {found:?}");
    root.run(None, &["tasks"]).ok();
}

/// A watched mirror shows an agent added while it runs, and the agent's messages.
#[test]
fn mirror_watch_shows_agents_added_while_it_runs() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("m");
    let arg = target.to_str().unwrap();
    let mut watch = root
        .command(None, &["mirror", arg, "--watch", "--interval", "30s", "--rounds", "3"])
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !target.join("circe.yaml").exists() && std::time::Instant::now() < until {
        crate::common::nap(50);
    }
    root.run(None, &["agent", "add", "dev2", "--role", "engineer"]).ok();
    crate::common::nap(300);
    let to = ["send", "--to", "agent:dev2", "--intent", "question", "--summary", "q2"];
    root.run(Some("coordinator"), &to).ok();
    assert!(watch.wait().unwrap().success());
    let inbox = target.join("AGENTS/dev2/INBOX");
    let n = std::fs::read_dir(&inbox).map_or(0, Iterator::count);
    assert_eq!(n, 1, "{} does not hold dev2's message", inbox.display());
}

/// Damage only SQL can make: a task's message copied into a second box, and an owner on a
/// waiting task. Doctor names both, with what to look at.
#[test]
fn doctor_reports_a_message_in_two_boxes_and_an_owner_on_a_waiting_task() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(2);
    let schema = url.rsplit("schema=").next().unwrap();
    c.psql(&format!(
        "INSERT INTO \"{schema}\".messages (box, file, body, msg_id)
         SELECT 'inbox:coordinator', file, body, msg_id FROM \"{schema}\".messages WHERE file LIKE '%T-001%'"
    ));
    c.psql(&format!(
        "UPDATE \"{schema}\".tasks SET owner = 'e1', claimed_at = '2026-01-01T00:00:00Z' WHERE task_id = 'T-000'"
    ));
    let out = root.run(None, &["doctor"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("lies in 2 boxes (inbox:coordinator, new)"), "{}", out.stderr);
    assert!(
        out.stderr.contains("task T-000 is new: it waits, but it names an owner (e1)"),
        "{}",
        out.stderr
    );
}

/// A held task whose owner SQL set to NULL: doctor says the owner is what is missing, and
/// where its message lies (the box of the agent that claimed it), not that the message is
/// out of place.
#[test]
fn doctor_says_a_held_task_lost_its_owner() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(1);
    root.run(Some("e1"), &["claim", "T-000"]).ok();
    let schema = url.rsplit("schema=").next().unwrap();
    c.psql(&format!("UPDATE \"{schema}\".tasks SET owner = NULL WHERE task_id = 'T-000'"));
    let out = root.run(None, &["doctor"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let said: Vec<&str> = out.stderr.lines().filter(|l| l.contains("T-000")).collect();
    assert!(
        said.iter().any(|l| l.contains("task T-000 is claimed: it is held, but it names no owner")
            && l.contains("inbox:e1")),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("but its message is in"), "{}", out.stderr);
}

/// The root a mirror names is one that `--root` takes (the unix socket's folder included).
#[test]
fn the_root_a_mirror_names_can_be_passed_to_root() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(1);
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("m");
    let out = root.run(None, &["--json", "mirror", target.to_str().unwrap()]);
    out.ok();
    let named = out.json()["root"].as_str().unwrap().to_string();
    let again = crate::common::Root::at(&named).run(None, &["--json", "tasks"]);
    again.ok();
    assert_eq!(again.json()["tasks"][0]["task_id"], "T-000", "{named}");
}

/// What commands that opened the root before `migrate --to-local` committed, and waited on
/// its locks, did: (the send's run, the claims' runs (of T-000, and `--next`), whether the
/// send's message is in the old database, whether it is in the new folder, T-000's record
/// there). A psql session
/// holding a lock for 2 s keeps the move waiting for it, and the commands behind the move.
fn writes_waiting_on_the_move(
    c: &crate::pg_cluster::Cluster,
    broken: bool,
) -> (Out, [Out; 2], bool, bool, String) {
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let mut root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(1);
    let hold = format!(
        "BEGIN; LOCK TABLE \"{schema}\".cursors IN ROW EXCLUSIVE MODE; SELECT pg_sleep(2); COMMIT;"
    );
    std::thread::scope(|s| {
        s.spawn(|| c.psql(&hold));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let dir = tempfile::tempdir().unwrap();
        let back = dir.path().join("back");
        if broken {
            root.env = vec![("CIRCE_TEST_BREAK".into(), "migrate-unfenced".into())];
        }
        let migrate =
            root.command(None, &["migrate", "--to-local", back.to_str().unwrap()]).spawn().unwrap();
        root.env.clear();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let send = root
            .command(
                Some("e1"),
                &[
                    "send",
                    "--to",
                    "coordinator",
                    "--intent",
                    "inform",
                    "--summary",
                    "late",
                    "--msg-id",
                    "20251121T170000000Z-late0001",
                ],
            )
            .spawn()
            .unwrap();
        let claim = root.command(Some("e1"), &["claim", "T-000"]).spawn().unwrap();
        let next = root.command(Some("e1"), &["claim", "--next"]).spawn().unwrap();
        let send = Out::from(&send.wait_with_output().unwrap());
        let claim = Out::from(&claim.wait_with_output().unwrap());
        let next = Out::from(&next.wait_with_output().unwrap());
        let moved = Out::from(&migrate.wait_with_output().unwrap());
        assert_eq!(moved.code, 0, "{moved:?}");
        let old = c.psql(&format!("SELECT count(*) FROM \"{schema}\".messages WHERE msg_id = '20251121T170000000Z-late0001'"));
        let local = walkdir(&back)
            .iter()
            .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("late0001")));
        let task =
            std::fs::read_to_string(back.join(".circe/TASKS/T-000.status")).unwrap_or_default();
        (send, [claim, next], old.trim() != "0", local, task)
    })
}

/// A send and two claims (of the task, and `--next`) that waited on the move write nothing
/// to the old root: each is refused (exit 3) and says where the root went (`--next` does not
/// pass on to other tasks and end "nothing to claim"); the task waits in the new folder.
#[test]
fn commands_waiting_on_a_move_to_a_folder_write_nothing_to_the_old_root() {
    let c = need_pg!();
    let (send, [claim, next], old, local, task) = writes_waiting_on_the_move(c, false);
    for out in [&send, &claim, &next] {
        assert_eq!(out.code, 3, "{out:?}");
        assert!(
            out.stderr.contains("was moved to") && out.stderr.contains("wrote nothing"),
            "{out:?}"
        );
    }
    assert!(!old && !local, "the refused send's message is nowhere");
    assert!(task.contains("status: new") && !task.contains("owner: e1"), "{task}");
}

/// The checker above, on a move that marks the root moved without fencing its tables: the
/// send exits 0 and its message is only in the old database.
#[test]
fn the_move_checker_sees_a_write_that_waited_land_in_the_old_root() {
    let c = need_pg!();
    let (send, _, old, local, _) = writes_waiting_on_the_move(c, true);
    assert_eq!(send.code, 0, "{send:?}");
    assert!(old && !local, "acknowledged, and lost to the new root");
}

/// A move into a database waits for a command still at work on the folder (its send's
/// events in a journal in tmp/, its process alive) to end, and then refuses the move while
/// those events are not logged, putting the root back: run after `doctor --repair`, the
/// move carries the send with its event. (Before, the move carried the message and left
/// its event behind in the old folder.)
#[test]
fn a_move_waits_for_a_command_at_work_and_carries_no_change_without_its_events() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    init(project.path(), None);
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(BIN);
        cmd.args(args).current_dir(project.path()).env_clear().envs(env.iter().copied());
        Out::from(&cmd.output().unwrap())
    };
    let send = [
        "--agent",
        "engineer",
        "send",
        "--to",
        "qa",
        "--intent",
        "inform",
        "--summary",
        "s",
        "--msg-id",
        "20251121T170000000Z-inflight",
    ];
    assert_eq!(run(&send, &[("CIRCE_CRASH_AT", "send.logging")]).code, 86);
    // The journal of its events, as a sender still running would have it.
    let tmp = project.path().join(".circe/tmp");
    let journal = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("events-"))
        .expect("the send's journal");
    let mut live = Command::new("sleep").arg("2").spawn().unwrap();
    let name = journal.file_name().unwrap().to_string_lossy().into_owned();
    let rest = name.splitn(3, '-').nth(2).unwrap().to_string();
    std::fs::rename(&journal, tmp.join(format!("events-{}-{rest}", live.id()))).unwrap();
    let url = c.fresh_url();
    let started = std::time::Instant::now();
    let moved = run(&["migrate", "--to", &url], &[]);
    let _ = live.wait();
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(1500),
        "it waited for the command"
    );
    assert_eq!(moved.code, 3, "{moved:?}");
    assert!(moved.stderr.contains("doctor --repair"), "{moved:?}");
    assert!(project.path().join(".circe/circe.yaml").is_file(), "the root is put back");
    run(&["doctor", "--repair"], &[]).ok();
    run(&["migrate", "--to", &url], &[]).ok();
    let logged = crate::common::Root::at(&url).run(None, &["log", "--json", "--limit", "1000"]);
    assert!(
        logged.ok().stdout.contains("20251121T170000000Z-inflight"),
        "the send's event went along: {}",
        logged.stdout
    );
}

/// A move into a folder that cannot stop every writer (a send's journal table held past the
/// lock wait) fails before writing anything: no folder appears beside the database, which
/// stays in use. (Before, the journal table was not locked with the rest: the move wrote the
/// folder, then failed to fence the tables, and left a second working root.)
#[test]
fn a_move_to_a_folder_that_cannot_stop_a_writer_writes_nothing() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(1);
    let hold = format!(
        "BEGIN; DELETE FROM \"{schema}\".event_journals WHERE false; SELECT pg_sleep(12); COMMIT;"
    );
    let dir = tempfile::tempdir().unwrap();
    let back = dir.path().join("back");
    let moved = std::thread::scope(|s| {
        s.spawn(|| c.psql(&hold));
        std::thread::sleep(std::time::Duration::from_millis(300));
        root.run(None, &["migrate", "--to-local", back.to_str().unwrap()])
    });
    assert_eq!(moved.code, 4, "{moved:?}");
    assert!(!back.join(".circe").exists(), "a folder was written: {:?}", walkdir(dir.path()));
    root.run(None, &["tasks"]).ok();
    root.run(Some("e1"), &["claim", "T-000"]).ok();
}

/// `migrate --to` stopped by a signal (a person's Ctrl-C while it waits for a command still
/// at work) puts the root back where it was and imports nothing: no folder left renamed
/// aside for the agents.
#[test]
fn a_migrate_stopped_by_a_signal_puts_the_root_back() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    init(project.path(), None);
    let circe = project.path().join(".circe");
    // A send still at work: its staging, named by a live process.
    let mut busy = Command::new("sleep").arg("30").spawn().unwrap();
    let ns = std::fs::read_link("/proc/self/ns/pid").unwrap().display().to_string();
    let ns: String = ns.chars().filter(char::is_ascii_digit).collect();
    std::fs::create_dir(circe.join(format!("tmp/seq-{}-ns{ns}-abcdefgh.part", busy.id()))).unwrap();
    let url = c.fresh_url();
    for sig in ["-INT", "-TERM"] {
        let m = Command::new(BIN)
            .args(["migrate", "--to", &url])
            .current_dir(project.path())
            .env_clear()
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        assert!(Command::new("kill").args([sig, &m.id().to_string()]).status().unwrap().success());
        let o = m.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{sig}: {err}");
        assert!(
            err.contains("waiting up to 10 s") && err.contains("nothing was moved"),
            "{sig}: {err}"
        );
        assert!(circe.join("circe.yaml").is_file(), "{sig}: the root was left aside: {err}");
        let tasks = Command::new(BIN).args(["tasks"]).current_dir(project.path()).output().unwrap();
        assert_eq!(tasks.status.code(), Some(0), "{sig}");
    }
    let _ = busy.kill();
    let _ = busy.wait();
}

/// `mirror --watch --json` prints one JSON line per round (the single mirror's document),
/// and SIGTERM or SIGINT ends it between two rounds with exit 0, as they end the streams.
#[test]
fn a_watching_mirror_prints_json_lines_and_ends_on_a_signal() {
    use std::io::BufRead as _;
    let c = need_pg!();
    let root = crate::common::Root::new(&c.fresh_url(), "server", 1);
    root.open_tasks(1);
    for sig in ["-TERM", "-INT"] {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("m");
        let args = ["mirror", target.to_str().unwrap(), "--watch", "--json", "--interval", "1s"];
        let mut watch = root.command(None, &args).spawn().unwrap();
        let out = watch.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines() {
                let _ = tx.send(l.unwrap());
            }
        });
        let Ok(first) = rx.recv_timeout(std::time::Duration::from_secs(15)) else {
            let _ = watch.kill();
            panic!("{sig}: no JSON line within 15 s");
        };
        let doc: serde_json::Value = serde_json::from_str(&first).unwrap();
        assert!(doc["last_event_id"].as_u64().unwrap() > 0, "{first}");
        assert!(doc["synced"]["written_count"].as_u64().unwrap() > 0, "{first}");
        let pid = watch.id().to_string();
        assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
        let status = watch.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{sig}");
        reader.join().unwrap();
        for l in rx.try_iter() {
            serde_json::from_str::<serde_json::Value>(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
        }
    }
}

/// `migrate --to` of a root named by its URL says the root is in a database already and
/// how it comes back into a folder (it said the URL was "not a folder").
#[test]
fn migrate_to_from_a_database_root_says_where_the_root_is() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 0);
    let o = root.run(None, &["migrate", "--to", &c.fresh_url()]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("this root is in a database already"), "{}", o.stderr);
    assert!(o.stderr.contains("circe migrate --to-local DIR"), "{}", o.stderr);
}

/// A project moved into a database, back into its folder, and into a database again: the
/// second move sets the old folder aside under the next free name (it failed on the first
/// one's after the import had committed, leaving the root renamed aside and no pointer).
#[test]
fn a_project_moves_into_a_database_a_second_time() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| in_project(project.path(), args);
    run(&["init"]).ok();
    let send = ["send", "--agent", "coordinator", "--to", "role:engineer", "--intent"];
    run(&[&send[..], &["implement_feature", "--task", "T-1", "--summary", "s"]].concat()).ok();
    run(&["migrate", "--to", &c.fresh_url()]).ok();
    run(&["migrate", "--to-local", "."]).ok();
    let again = run(&["migrate", "--to", &c.fresh_url()]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(project.path().join(".circe.migrated.2/MIGRATED.txt").is_file());
    let tasks = run(&["tasks", "--json"]);
    tasks.ok();
    assert_eq!(tasks.json()["tasks"][0]["task_id"], "T-1", "{}", tasks.stderr);
}

/// `migrate --to` into a root that holds a team's work beyond tasks, messages and events
/// (a cursor, a chat line) is refused as one that holds tasks is (it merged into the
/// cursor, or failed on the server's duplicate key), and a `--clock` that is not the
/// root's is refused; the folder is put back each time.
#[test]
fn migrate_into_a_root_with_work_or_another_clock_is_refused() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| in_project(project.path(), args);
    run(&["init"]).ok();
    let with_cursor = c.fresh_url();
    let root = crate::common::Root::new(&with_cursor, "client", 0);
    root.run(None, &["watch", "--all", "--cursor", "other", "--once"]).ok();
    let o = run(&["migrate", "--to", &with_cursor]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(o.stderr.contains("holds a team's work already"), "{}", o.stderr);
    let o = run(&["migrate", "--to", &with_cursor, "--clock", "server"]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    run(&["tasks"]).ok();
}

/// `circe ARGS` run in the project folder `dir`, with no environment.
fn in_project(dir: &Path, args: &[&str]) -> Out {
    Out::from(&Command::new(BIN).args(args).current_dir(dir).env_clear().output().unwrap())
}

/// Followers opened before `migrate --to-local` (a `watch`, a `wait`, a `mirror --watch`)
/// end once the root moved, refused as a command opened after it is (exit 3, naming where
/// it went), instead of following a root nobody writes to any more.
#[test]
fn followers_of_a_root_moved_to_a_folder_end_saying_where_it_went() {
    let c = need_pg!();
    let root = crate::common::Root::new(&c.fresh_url(), "server", 1);
    root.open_tasks(1);
    let dir = tempfile::tempdir().unwrap();
    let (mirror, back) = (dir.path().join("m"), dir.path().join("back"));
    let followers = [
        root.command(None, &["watch"]).spawn().unwrap(),
        root.command(Some("e1"), &["wait", "--for", "inbox", "--new", "--timeout", "60s"])
            .spawn()
            .unwrap(),
        root.command(None, &["mirror", mirror.to_str().unwrap(), "--watch", "--interval", "60s"])
            .spawn()
            .unwrap(),
    ];
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !mirror.join("circe.yaml").exists() && std::time::Instant::now() < until {
        crate::common::nap(50);
    }
    crate::common::nap(500);
    root.run(None, &["migrate", "--to-local", back.to_str().unwrap()]).ok();
    // Bounded: a follower still running after 30 s is stopped, and fails the test.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for mut f in followers {
        while f.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
            crate::common::nap(50);
        }
        let _ = f.kill();
        let out = crate::common::Out::from(&f.wait_with_output().unwrap());
        assert_eq!(out.code, 3, "{out:?}");
        assert!(out.stderr.contains("was moved to"), "{out:?}");
    }
    // Moving it again says where it went, rather than pointing at `--to-local` (refused).
    let again = root.run(None, &["migrate", "--to", &c.fresh_url()]);
    assert_eq!(again.code, 3, "{again:?}");
    assert!(again.stderr.contains("was moved to"), "{again:?}");
}

/// A mirror's marker names its root as `--root` takes it: pasted back, with nothing else
/// set and from another folder, it opens that root (reached over a unix socket too, whose
/// name for a mirror alone, `postgres:///SOCKET:PORT/DB`, no command takes). A marker an
/// older circe wrote (that name) is still this root's, and is then written the new way.
#[test]
fn a_mirror_marker_names_its_root_as_root_takes_it() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(1);
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m");
    root.run(None, &["mirror", m.to_str().unwrap()]).ok();
    let marker = m.join(".circe-mirror");
    let named = || {
        let text = std::fs::read_to_string(&marker).unwrap();
        text.trim().strip_prefix("mirror of ").unwrap().to_string()
    };
    let pasted = named();
    let out = Out::from(
        &Command::new(BIN)
            .args(["--root", &pasted, "show", "T-000", "--json"])
            .current_dir(dir.path())
            .env_clear()
            .output()
            .unwrap(),
    );
    assert_eq!(out.code, 0, "--root `{pasted}` (the marker's): {out:?}");
    assert_eq!(out.json()["task"]["task_id"], "T-000", "{}", out.stdout);
    // The marker as an older circe wrote it.
    let schema = url.rsplit("schema=").next().unwrap();
    let old = format!("postgres://{}:{}/postgres?schema={schema}", c.socket.display(), c.port);
    let mut perms = std::fs::metadata(&marker).unwrap().permissions();
    #[expect(clippy::permissions_set_readonly_false, reason = "a test rewrites the marker")]
    perms.set_readonly(false);
    std::fs::set_permissions(&marker, perms).unwrap();
    std::fs::write(&marker, format!("mirror of {old}\n")).unwrap();
    root.run(None, &["mirror", m.to_str().unwrap()]).ok();
    assert_eq!(named(), pasted);
}
