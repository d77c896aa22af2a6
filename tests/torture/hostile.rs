//! Hostile input: bad names, planted links / FIFOs / half-written and foreign files, a
//! read-only box for an unprivileged user, and a clock that goes backwards. Each must be
//! refused or quarantined with a clear message; nothing outside the root is followed,
//! read into a box, modified or moved; nothing is lost.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::Path;
use std::process::Command;

use crate::common::{Root, lost_or_duplicated, open_args};

/// A file outside the root that links point at: it must never change or move.
struct Bait {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    ino: u64,
    text: String,
}

impl Bait {
    fn new(r: &Root) -> Bait {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.md");
        // A valid-looking message, so following the link would "work".
        let text = std::fs::read_dir(r.dir.join("NEW_MESSAGES"))
            .unwrap()
            .flatten()
            .next()
            .map_or_else(|| "secret\n".to_string(), |e| std::fs::read_to_string(e.path()).unwrap());
        std::fs::write(&path, &text).unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        Bait { _dir: dir, path, ino, text }
    }

    fn intact(&self) -> Result<(), String> {
        let m = std::fs::symlink_metadata(&self.path).map_err(|e| format!("bait gone: {e}"))?;
        let t = std::fs::read_to_string(&self.path).unwrap();
        if m.ino() != self.ino || t != self.text {
            return Err("bait outside the root was modified or replaced".into());
        }
        Ok(())
    }
}

#[test]
fn hostile_names_are_refused() {
    let r = Root::new(0);
    r.open("T1");
    let outside = r.tmp.path().parent().unwrap().to_path_buf();
    let before: Vec<_> =
        std::fs::read_dir(&outside).unwrap().flatten().map(|e| e.file_name()).collect();
    let long = "a".repeat(300);
    let bad = ["../evil", "a/b", "-x", ".hidden", "..", long.as_str(), "ä"];
    for n in bad {
        let o = r.run(None, &["agent", "add", n, "--role", "engineer"]);
        assert!(o.code == 2 || o.code == 3, "agent add {n:?}: {o:?}");
        assert!(o.stderr.starts_with("error: "), "{o:?}");
        let o = r.run(Some("engineer"), &["claim", n]);
        assert!(o.code == 2 || o.code == 3, "claim {n:?}: {o:?}");
        let o = r.run(Some("coordinator"), &open_args(n));
        assert!(o.code == 2 || o.code == 3, "send --task {n:?}: {o:?}");
        let o = r.run(Some(n), &["inbox"]);
        assert!(o.code == 2 || o.code == 3 || o.code == 5, "--agent {n:?}: {o:?}");
    }
    // NUL cannot pass through argv; the allowlist refuses it before any syscall.
    assert!(circe::names::check_agent("a\0b").is_err());
    assert!(circe::names::check_task_id("T\0x").is_err());
    // Non-UTF-8 arguments.
    let raw = std::ffi::OsStr::from_bytes(b"T\xff1");
    let o = r.cmd(Some("engineer"), &[], &[]).arg("claim").arg(raw).output().unwrap();
    assert!(matches!(o.status.code(), Some(2 | 3)), "non-UTF-8 task id: {o:?}");
    let after: Vec<_> =
        std::fs::read_dir(&outside).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(
        after.iter().all(|n| before.contains(n) || !n.to_string_lossy().contains("evil")),
        "something was created outside the root"
    );
    assert!(r.task_problems().is_empty());
    let (code, v) = r.doctor(false);
    assert_eq!(code, 0, "{v:?}");
}

/// Run circe and wait at most `secs`: a command that hangs (on a planted FIFO) is killed
/// and fails the test. Returns the exit code and stderr.
fn run_bounded(
    r: &Root,
    agent: Option<&str>,
    args: &[&str],
    secs: u64,
    label: &str,
) -> (i32, String) {
    let mut child = r
        .cmd(agent, args, &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() >= secs {
            let _ = child.kill();
            panic!("{label}: circe {args:?} hangs on a planted file");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

#[test]
fn planted_files_are_refused_or_quarantined() {
    planted(false);
}

/// Links and FIFOs planted in TASKS/ are never followed and never hang a command; doctor
/// --repair quarantines them, and doctor is clean afterwards.
#[test]
fn planted_files_in_tasks() {
    planted(true);
}

fn planted(plant_tasks: bool) {
    let r = Root::new(1);
    r.open("T1");
    r.open("T2");
    let bait = Bait::new(&r);
    let nm = r.dir.join("NEW_MESSAGES");
    let inbox = r.dir.join("AGENTS/engineer/INBOX");
    let tasks = r.dir.join("TASKS");
    let before = r.messages();
    symlink(&bait.path, nm.join("20250101_000000_coordinator-all_implement-feature_LINK.md"))
        .unwrap();
    symlink(&bait.path, inbox.join("20250101_000000_coordinator-engineer_ask.md")).unwrap();
    std::fs::hard_link(&bait.path, nm.join("hard.md")).unwrap();
    mkfifo(&nm.join("fifo.md"));
    mkfifo(&inbox.join("fifo.md"));
    std::fs::write(nm.join("half.md"), "---\nmsg_id: x\nfrom: coordin").unwrap();
    std::fs::write(nm.join("notes.txt"), "foreign").unwrap();
    std::fs::write(nm.join(".tmp-123-abc"), "staging").unwrap();
    std::fs::create_dir(nm.join("dir.md")).unwrap();
    if plant_tasks {
        symlink(&bait.path, tasks.join("T9.status")).unwrap();
        symlink(&bait.path, tasks.join("T1.owner")).unwrap();
        mkfifo(&tasks.join("T8.status"));
    }

    let run = |agent: Option<&str>, args: &[&str]| run_bounded(&r, agent, args, 20, "planted");
    let mut problems = Vec::new();
    for (agent, args) in [
        (None, vec!["tasks"]),
        (Some("engineer"), vec!["inbox"]),
        (Some("engineer"), vec!["claim", "T1"]),
        (Some("e1"), vec!["claim", "--next"]),
        (Some("engineer"), vec!["claim", "T9"]),
        (Some("engineer"), vec!["claim", "T8"]),
        (Some("engineer"), vec!["release", "T1"]),
        (None, vec!["show", "T1"]),
        (None, vec!["reap"]),
    ] {
        let (code, err) = run(agent, &args);
        if code == 101 || err.contains("panicked") {
            problems.push(format!("{args:?} panicked: {err}"));
        }
        if code != 0 && !err.starts_with("error: ") {
            problems.push(format!("{args:?} exit {code} without a clear error: {err}"));
        }
        if let Err(e) = bait.intact() {
            problems.push(format!("after {args:?}: {e}"));
        }
    }
    let (code, v) = r.doctor(false);
    if code == 0 || v.len() < 6 {
        problems.push(format!("doctor missed planted files: {v:#?}"));
    }
    let (_, v) = r.doctor(true);
    eprintln!("doctor --repair on planted files: {v:#?}");
    let (_, v) = r.doctor(false);
    // Everything planted, in the boxes and in TASKS/, was quarantined: doctor is clean.
    let left: Vec<&String> = v.iter().collect();
    if !left.is_empty() {
        problems.push(format!("doctor after --repair: {left:?}"));
    }
    if let Err(e) = bait.intact() {
        problems.push(e);
    }
    // The symlinks were moved, never their targets; the legit messages are all there.
    let after = r.messages();
    problems.extend(lost_or_duplicated(&before, &after));
    if !plant_tasks {
        problems.extend(r.task_problems());
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// `doctor --repair` run by a user who cannot read a waiting task's message: reported as not
/// read, left where it is, and the task kept (it used to be moved away as "does not parse",
/// and the task removed as never delivered).
#[test]
fn repair_by_a_user_who_cannot_read_a_message_keeps_it_and_its_task() {
    let Some((_parent, r)) = nobodys_root("repair_by_a_user_who_cannot_read_a_message", 0) else {
        return;
    };
    // The ticket is root's, readable by root alone.
    let ticket =
        std::fs::read_dir(r.dir.join("NEW_MESSAGES")).unwrap().next().unwrap().unwrap().path();
    assert!(Command::new("chown").arg("0:0").arg(&ticket).status().unwrap().success());
    std::fs::set_permissions(&ticket, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let o = nobody_on(&r.dir, None, ["doctor", "--repair"]);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code().is_none() || err.contains("setpriv:") {
        eprintln!("SKIPPED: setpriv cannot drop privileges here: {err}");
        return;
    }
    assert!(err.contains("cannot be read") && err.contains("repair leaves it"), "{err}");
    assert!(ticket.is_file(), "the message was moved away: {err}");
    assert!(r.dir.join("TASKS/T1.status").is_file(), "the task was removed: {err}");
    assert_eq!(r.status("T1").unwrap().status.as_str(), "new");
}

/// A root with task T1 waiting and `engineers` more engineers (e1, e2, ...), owned by
/// `nobody` (65534) in a folder all may enter, and its
/// parent folder (removed when dropped); `None` (said) when setpriv is missing.
fn nobodys_root(test: &str, engineers: usize) -> Option<(tempfile::TempDir, Root)> {
    let parent = open_parent(test)?;
    let r = Root::new_in(parent.path(), engineers);
    r.open("T1");
    let chown = Command::new("chown").args(["-R", "65534:65534"]).arg(r.tmp.path()).status();
    assert!(chown.unwrap().success());
    std::fs::set_permissions(r.tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    Some((parent, r))
}

#[test]
fn read_only_box_as_unprivileged_user() {
    let Some((_parent, r)) = nobodys_root("read_only_box_as_unprivileged_user", 0) else { return };
    let inbox = r.dir.join("AGENTS/engineer/INBOX");
    std::fs::set_permissions(&inbox, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let before = r.messages();
    let nobody = |args: &[&str]| {
        let o = nobody_on(&r.dir, Some("engineer"), args);
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = nobody(&["whoami-probe"]);
    if code == -1 {
        eprintln!("SKIPPED: setpriv cannot drop privileges here: {err}");
        return;
    }
    let (code, err) = nobody(&["claim", "T1"]);
    assert_ne!(code, 0, "claim into a read-only INBOX succeeded as nobody");
    assert!(err.starts_with("error: ") && err.contains("ermission denied"), "unclear: {err}");
    // The folder that refused is named: the INBOX the message was to go into.
    assert!(
        err.contains("into ") && err.contains("AGENTS/engineer/INBOX (where it goes)"),
        "{err}"
    );
    assert_eq!(r.status("T1").unwrap().owner, None);
    assert!(lost_or_duplicated(&before, &r.messages()).is_empty());
    // Read-only NEW_MESSAGES: a send must fail cleanly and leave no half-open task.
    std::fs::set_permissions(
        r.dir.join("NEW_MESSAGES"),
        std::os::unix::fs::PermissionsExt::from_mode(0o555),
    )
    .unwrap();
    let o = nobody_on(&r.dir, Some("coordinator"), open_args("T2"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0));
    assert!(err.contains("ermission denied"), "unclear: {err}");
    std::fs::set_permissions(
        r.dir.join("NEW_MESSAGES"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(&inbox, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, err) = nobody(&["claim", "T1"]);
    assert_eq!(code, 0, "{err}");
    assert!(r.status("T2").is_none(), "a failed send left a task record behind");
    r.doctor(true);
    r.assert_clean("after read-only boxes");
}

#[test]
fn clock_going_backwards() {
    let r = Root::new(1);
    r.open("T1");
    let at =
        |now: &str, agent: &str, args: &[&str]| r.run_env(Some(agent), args, &[("CIRCE_NOW", now)]);
    assert_eq!(at("2030-01-01T00:00:00Z", "engineer", &["claim", "T1"]).code, 0);
    // Earlier clock: the lease has not run out, so the take-over is refused.
    let o = at("2020-01-01T00:00:00Z", "e1", &["claim", "T1"]);
    assert_eq!(o.code, 4, "{o:?}");
    // The owner's heartbeat from a clock in the past keeps the lease (a heartbeat never
    // cuts one short), and corrupts nothing.
    assert_eq!(at("2020-01-01T00:00:00Z", "engineer", &["heartbeat", "T1"]).code, 0);
    assert_eq!(at("2025-01-01T00:00:00Z", "e1", &["claim", "T1"]).code, 4);
    let o = at("2030-01-01T01:00:00Z", "e1", &["claim", "T1"]);
    assert_eq!(o.code, 0, "{o:?}");
    let o = at("2020-01-01T00:00:00Z", "engineer", &["status", "T1", "in_progress"]);
    assert_eq!(o.code, 4, "old owner after the clock jumped: {o:?}");
    r.assert_clean("clock backwards");
    assert_eq!(r.status("T1").unwrap().owner.as_deref(), Some("e1"));
}

/// Links and FIFOs planted in queue/ (the derived `--next` index and the board log) are
/// never followed and never hang a command: each is replaced by a regular file.
#[test]
fn planted_files_in_queue() {
    for (plant, kind) in [
        ("symlink", "head"),
        ("fifo", "head"),
        ("symlink", "lane"),
        ("fifo", "lane"),
        ("symlink", "board"),
        ("fifo", "board"),
    ] {
        let what = format!("{plant} as the {kind}");
        let r = Root::new(1);
        r.open("T1");
        r.open("T2");
        r.ok(None, &["tasks"]); // the board log exists
        let bait = Bait::new(&r);
        let queue = r.dir.join("queue");
        let lane = std::fs::read_dir(&queue)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "lane"))
            .expect("a lane after two opens");
        let target = match kind {
            "head" => lane.with_extension("head"),
            "lane" => lane.clone(),
            _ => queue.join("board.log"),
        };
        let _ = std::fs::remove_file(&target);
        match plant {
            "symlink" => symlink(&bait.path, &target).unwrap(),
            _ => mkfifo(&target),
        }
        // claim --next reads the lane and moves its head; release appends to the lane; every
        // record write appends to the board log; tasks reads it.
        for (agent, args) in [
            (Some("e1"), vec!["claim", "T1"]),
            (Some("e1"), vec!["claim", "--next"]),
            (Some("e1"), vec!["release", "T1"]),
            (None, vec!["tasks"]),
        ] {
            let (code, err) = run_bounded(&r, agent, &args, 10, &what);
            // Exit 6 (nothing to claim) is an answer on stdout, not an error.
            assert!(
                code == 0 || code == 6 || err.starts_with("error: "),
                "{what}: {args:?}: {err}"
            );
            bait.intact().unwrap_or_else(|e| panic!("{what}: after {args:?}: {e}"));
        }
        r.ok(None, &["doctor", "--repair"]);
        bait.intact().unwrap_or_else(|e| panic!("{what}: {e}"));
        let m = std::fs::symlink_metadata(&target);
        assert!(m.is_err() || m.unwrap().is_file(), "{what}: still planted after repair");
    }
}

/// A symlink planted in locks/ is refused, never followed: no file is created or locked
/// outside the root through it.
#[test]
fn planted_lock_links_are_refused() {
    let r = Root::new(1);
    r.open("T1");
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("made-through-a-link");
    let lock = r.dir.join("locks/task-T1.lock");
    let _ = std::fs::remove_file(&lock); // made by the open; nobody holds it now
    symlink(&target, &lock).unwrap();
    let o = r.run(Some("e1"), &["claim", "T1"]);
    assert_ne!(o.code, 0, "{o:?}");
    assert!(o.stderr.starts_with("error: cannot open lock file"), "{o:?}");
    assert!(o.stderr.contains("symlink"), "the hint names the cause: {o:?}");
    assert!(!target.exists(), "a file was created outside the root through the link");
    assert_eq!(r.status("T1").unwrap().status.as_str(), "new", "nothing changed");
    let (code, v) = r.doctor(false);
    assert!(code != 0 && v.iter().any(|x| x.contains("locks/task-T1.lock")), "{v:?}");
    r.doctor(true);
    let (code, v) = r.doctor(false);
    assert_eq!(code, 0, "doctor --repair moved the link away: {v:?}");
    assert!(!target.exists(), "quarantining the link never followed it");
    r.ok(Some("e1"), &["claim", "T1"]);
}

/// A task's lock file hard-linked to a file outside the root (a snapshot made with `cp -al`
/// or `rsync --link-dest`): the journal of a change is never written into it, so the outside
/// file keeps its bytes.
#[test]
fn a_hard_linked_lock_file_gets_no_journal() {
    let r = Root::new(1);
    r.open("T1");
    let outside = tempfile::tempdir().unwrap();
    let bait = outside.path().join("snapshot-of-the-lock");
    let lock = r.dir.join("locks/task-T1.lock");
    std::fs::write(&bait, b"").unwrap();
    let _ = std::fs::remove_file(&lock); // made by the open; nobody holds it now
    std::fs::hard_link(&bait, &lock).unwrap();
    r.ok(Some("e1"), &["claim", "T1"]);
    r.ok(Some("e1"), &["status", "T1", "in_progress"]);
    let bytes = std::fs::read(&bait).unwrap();
    assert!(bytes.is_empty(), "written into the outside file: {}", String::from_utf8_lossy(&bytes));
    // doctor says so (it cannot mend it: a lock file is never replaced), until the link goes.
    let (code, v) = r.doctor(false);
    assert!(code != 0 && v.iter().any(|x| x.contains("task-T1.lock has 2 links")), "{v:?}");
    std::fs::remove_file(&bait).unwrap();
    assert_eq!(r.doctor(false).0, 0);
}

/// A copy of a task's message planted in a second box is reported by doctor (it lists each
/// box once and re-checks such a task under its lock).
#[test]
fn planted_copy_of_a_message_is_reported() {
    let r = Root::new(1);
    r.open("T1");
    r.ok(Some("e1"), &["claim", "T1"]);
    let name = r.status("T1").unwrap().message;
    let agent = r.dir.join("AGENTS/e1");
    std::fs::copy(agent.join("INBOX").join(&name), agent.join("WORKSPACE").join(&name)).unwrap();
    let (code, v) = r.doctor(false);
    assert!(code != 0 && v.iter().any(|x| x.contains("lies in 2 boxes")), "{v:?}");
}

/// A root its reader may not write (every file and folder without write permission, read
/// by an unprivileged user): the reports read it as it is, without their derived files or
/// locks they could not make; a change fails naming the permission, and nothing changes.
#[test]
fn a_root_read_only_to_its_reader_is_read_as_it_is() {
    let Some(parent) = open_parent("a_root_read_only_to_its_reader_is_read_as_it_is") else {
        return;
    };
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap();
    };
    let r = Root::new_in(parent.path(), 0);
    r.open("T1");
    r.open("T2");
    r.ok(Some("engineer"), &["claim", "T1"]);
    r.ok(
        Some("coordinator"),
        &["send", "--to", "engineer", "--intent", "inform", "--summary", "hi"],
    );
    // The board's log as appends leave it (no header yet): the first report rebuilds it.
    let board = r.dir.join("queue/board.log");
    let text = std::fs::read_to_string(&board).unwrap();
    std::fs::write(
        &board,
        text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n") + "\n",
    )
    .unwrap();
    mode(r.tmp.path(), 0o755);
    assert!(
        Command::new("chmod").args(["-R", "a-w"]).arg(r.tmp.path()).status().unwrap().success()
    );
    let before = r.messages();
    let nobody = |agent: &str, args: &[&str]| {
        let o = nobody_on(&r.dir, Some(agent), args);
        let out =
            format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        (o.status.code().unwrap_or(-1), out)
    };
    let mut problems = Vec::new();
    for (agent, args, want) in [
        ("engineer", &["tasks"][..], 0),
        ("engineer", &["inbox"], 0),
        ("engineer", &["show", "T1"], 0),
        ("engineer", &["doctor"], 0),
        ("engineer", &["prime"], 0),
        ("engineer", &["claim", "--next", "--dry-run"], 0),
        ("engineer", &["seq", "state"], 0),
    ] {
        let (code, out) = nobody(agent, args);
        if code != want {
            problems.push(format!("{args:?}: exit {code}, not {want}: {out}"));
        }
    }
    let (_, tasks) = nobody("engineer", &["tasks"]);
    if !(tasks.contains("T1") && tasks.contains("T2")) {
        problems.push(format!("tasks does not show both tasks: {tasks}"));
    }
    for args in [&["status", "T1", "in_progress"][..], &["claim", "T2"]] {
        let (code, out) = nobody("engineer", args);
        if code != 1 || !out.contains("ermission denied") {
            problems.push(format!("{args:?}: exit {code}, not 1 naming the permission: {out}"));
        }
    }
    assert!(
        Command::new("chmod").args(["-R", "u+w"]).arg(r.tmp.path()).status().unwrap().success()
    );
    assert!(lost_or_duplicated(&before, &r.messages()).is_empty());
    assert_eq!(r.status("T2").unwrap().owner, None);
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Two users of one group (umask 002, a setgid folder: how a team shares a checkout) take
/// turns on one root: every file either one makes is the group's to write, so neither locks
/// the other out, even where one rewrote a file the other made (the board's log compacted,
/// the chat archived and begun anew, the event log rotated by `archive`).
#[test]
fn two_users_of_one_group_share_a_root() {
    let Some(parent) = open_parent("two_users_of_one_group_share_a_root") else { return };
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap();
    };
    let team = parent.path().join("team");
    std::fs::create_dir(&team).unwrap();
    assert!(Command::new("chown").arg("0:60000").arg(&team).status().unwrap().success());
    mode(&team, 0o2775);
    // (user, agent, args): run as uid 60001 ("a") or 60002 ("b"), group 60000, umask 002.
    let run = |uid: u32, agent: &str, args: &[&str]| {
        let o = Command::new("setpriv")
            .arg(format!("--reuid={uid}"))
            .args(["--regid=60000", "--clear-groups", "sh", "-c", "umask 002; exec \"$0\" \"$@\""])
            .arg(crate::common::BIN)
            .args(args)
            .current_dir(&team)
            .env_clear()
            .env("CIRCE_AGENT", agent)
            .env("CIRCE_DURABILITY", "relaxed")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (o.status.code().unwrap_or(-1), err)
    };
    let (code, err) = run(60001, "coordinator", &["init"]);
    if code == -1 || err.contains("setpriv:") {
        eprintln!("SKIPPED: setpriv cannot drop privileges here: {err}");
        return;
    }
    let (a, b) = (60001, 60002);
    let open = "send --to role:engineer --intent implement_feature --summary do-it --task";
    let steps: Vec<(u32, &str, String)> = vec![
        (a, "coordinator", format!("{open} T1")),
        (b, "engineer", "claim T1".into()),
        (b, "engineer", "status T1 in_progress".into()),
        (b, "engineer", "heartbeat T1".into()),
        (a, "coordinator", "chat say --to engineer hi".into()),
        (b, "engineer", "chat say --to coordinator hello".into()),
        (a, "coordinator", "chat archive".into()),
        (b, "engineer", "chat say --to coordinator again".into()),
        (a, "coordinator", "doctor --repair".into()),
        (b, "engineer", "check T1 tests_passed=true".into()),
        (b, "engineer", "status T1 completed".into()),
        (a, "coordinator", format!("{open} T2")),
        (a, "engineer", "claim --next".into()),
        (b, "engineer", "done T1".into()),
        (a, "coordinator", "archive".into()),
        (b, "engineer", "send --to coordinator --intent inform --summary T2-next".into()),
        (a, "engineer", "release T2".into()),
        (b, "engineer", "claim T2".into()),
        (a, "coordinator", "doctor".into()),
    ];
    for (n, (uid, agent, args)) in steps.iter().enumerate() {
        let args: Vec<&str> = args.split_whitespace().collect();
        let (code, err) = run(*uid, agent, &args);
        assert_eq!(code, 0, "step {n}, uid {uid}: circe {args:?}: {err}");
    }
    // Every file the two made is the group's to write (the umask decides, as for any tool).
    let closed = not_group_writable(&team.join(".circe"));
    assert!(closed.is_empty(), "files the group may not write: {closed:#?}");
}

/// The files under `dir` (`mode path`) its group may not write.
fn not_group_writable(dir: &Path) -> Vec<String> {
    let mut closed = Vec::new();
    let mut walk = vec![dir.to_path_buf()];
    while let Some(dir) = walk.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk.push(e.path());
            } else if m.mode() & 0o020 == 0 {
                closed.push(format!("{:o} {}", m.mode() & 0o777, e.path().display()));
            }
        }
    }
    closed
}

/// A send to a role whose one INBOX this user may not write leaves that copy staged (the
/// send stands for the others: `committed`); the sender's next send, to anyone, is refused
/// saying it is the earlier message that waits, with `committed: false` (nothing of it was
/// sent), and goes once the INBOX is mended.
#[test]
fn a_staged_copy_of_an_earlier_send_is_named_by_the_next_one() {
    let Some((_parent, r)) = nobodys_root("a_staged_copy_of_an_earlier_send", 1) else { return };
    // The second of the role's INBOXes (e1, engineer): the first copy lands.
    let inbox = r.dir.join("AGENTS/engineer/INBOX");
    std::fs::set_permissions(&inbox, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let nobody = |args: &[&str]| {
        let o = nobody_on(&r.dir, Some("qa"), args);
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let send = |to: &str, what: &str| {
        nobody(&["send", "--json", "--to", to, "--intent", "inform", "--summary", what])
    };
    let (code, out) = send("role:engineer", "first");
    if code == -1 {
        eprintln!("SKIPPED: setpriv cannot drop privileges here");
        return;
    }
    assert_eq!(code, 1, "{out}");
    let (code, out) = send("coordinator", "second");
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let e = &v["error"];
    assert!(
        e["message"].as_str().unwrap().contains("earlier numbered message is not finished"),
        "{out}"
    );
    assert_eq!(e["details"]["committed"], false, "{out}");
    std::fs::set_permissions(&inbox, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, out) = send("coordinator", "second");
    assert_eq!(code, 0, "{out}");
    r.doctor(true);
    r.assert_clean("after the earlier send was finished");
}

/// On a read-only mount a change fails naming the read-only filesystem (not a permission a
/// chmod could mend) and changes nothing; the reports read. Run in a mount namespace of its
/// own (`unshare -m`), so no mount outlives the test.
#[test]
fn a_read_only_mount_is_named_as_such() {
    let r = Root::new(0);
    r.open("T1");
    let dir = r.tmp.path().display().to_string();
    let run = |args: &str| {
        let script = format!(
            "mount --bind '{dir}' '{dir}' && mount -o remount,ro,bind '{dir}' && exec '{}' {args}",
            crate::common::BIN
        );
        let o = Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .env("CIRCE_ROOT", &r.dir)
            .env("CIRCE_AGENT", "engineer")
            .output()
            .unwrap();
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = run("tasks");
    if code != 0 && (err.contains("unshare") || err.contains("mount")) {
        eprintln!("SKIPPED a_read_only_mount_is_named_as_such: {err}");
        return;
    }
    assert_eq!(code, 0, "{err}");
    for args in ["claim T1", "claim --next"] {
        let (code, err) = run(args);
        assert_eq!(code, 1, "{args}: {err}");
        assert!(err.contains("read-only") && !err.contains("ermission"), "{args}: {err}");
    }
    assert_eq!(r.status("T1").unwrap().owner, None);
    r.assert_clean("after changes refused by a read-only mount");
}

/// `archive` under a process limit that leaves it no thread to make (`ulimit -u`, as a
/// container's pids limit does) removes the originals on its own thread: exit 0, not a panic
/// after its commit point. Run as `nobody`, for whom the limit holds.
#[test]
fn archive_without_threads_to_spare_does_the_work_itself() {
    let Some((_parent, r)) = nobodys_root("archive_without_threads_to_spare", 0) else { return };
    r.ok(Some("engineer"), &["claim", "T1"]);
    r.ok(Some("engineer"), &["status", "T1", "in_progress"]);
    r.ok(Some("engineer"), &["check", "T1", "tests_passed=true"]);
    r.ok(Some("engineer"), &["status", "T1", "completed"]);
    let chown = Command::new("chown").args(["-R", "65534:65534"]).arg(r.tmp.path()).status();
    assert!(chown.unwrap().success());
    let script = format!("ulimit -u 1; exec '{}' archive --older-than 1s", crate::common::BIN);
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", &script])
        .env_clear()
        .env("CIRCE_ROOT", &r.dir)
        .env("CIRCE_NOW", "2031-01-01T00:00:00Z")
        .env("CIRCE_DURABILITY", "relaxed")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("setpriv:") {
        eprintln!("SKIPPED: setpriv cannot drop privileges here: {err}");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(r.status("T1").is_none(), "T1 was not archived: {err}");
    r.assert_clean("after an archive with no thread to spare");
}

/// `wait` under a process limit that leaves no thread for the file watcher: an error that
/// says so and offers `--poll` (notify panicked, exit 134), and `--poll` then waits; with
/// one thread to spare it waits as always.
#[test]
fn wait_without_a_thread_to_spare_says_so() {
    let Some((_parent, r)) = nobodys_root("wait_without_a_thread_to_spare", 0) else { return };
    let chown = Command::new("chown").args(["-R", "65534:65534"]).arg(r.tmp.path()).status();
    assert!(chown.unwrap().success());
    let wait = |limit: u32, poll: &str| {
        let script = format!(
            "ulimit -u {limit}; exec '{}' wait --for inbox --new --timeout 1s {poll}",
            crate::common::BIN
        );
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", &script])
            .env_clear()
            .env("CIRCE_ROOT", &r.dir)
            .env("CIRCE_AGENT", "engineer")
            .output()
            .unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, err) = wait(1, "");
    if err.contains("setpriv:") {
        eprintln!("SKIPPED: setpriv cannot drop privileges here: {err}");
        return;
    }
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("cannot start the thread that watches"), "{err}");
    assert!(err.contains("--poll"), "{err}");
    assert_eq!(wait(1, "--poll 200ms").0, Some(7));
    for _ in 0..3 {
        let (code, err) = wait(2, "");
        assert_eq!(code, Some(7), "with a thread to spare: {err}");
    }
}

/// A root nobody has written to since `init`, read by a user who may not write it: the
/// reports read it (the locks they take were made by `init`).
#[test]
fn a_fresh_root_reads_for_a_user_who_may_not_write() {
    let Some(parent) = open_parent("a_fresh_root_reads_for_a_user_who_may_not_write") else {
        return;
    };
    let dir = parent.path().join("p");
    std::fs::create_dir(&dir).unwrap();
    let init = Command::new(crate::common::BIN).arg("init").current_dir(&dir).output().unwrap();
    assert!(init.status.success(), "{init:?}");
    let reports =
        [&["tasks"][..], &["board", "--once"], &["claim", "--next", "--dry-run"], &["inbox"]];
    for args in reports {
        let o = as_nobody()
            .args(args)
            .current_dir(&dir)
            .env_clear()
            .env("CIRCE_AGENT", "engineer")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if err.contains("setpriv:") {
            eprintln!("SKIPPED: setpriv cannot drop privileges here: {err}");
            return;
        }
        assert!(matches!(o.status.code(), Some(0 | 6)), "{args:?}: {err}");
        assert!(!err.contains("cannot open lock file"), "{args:?}: {err}");
        // Nothing to log, nothing to warn of.
        assert!(!err.contains("warning"), "{args:?}: {err}");
    }
}

/// `doctor` run by a user who cannot read one task's lock file, then its record: the task is
/// reported (naming the file and the permission) and the report goes on; its message is not
/// taken for a stray (it is the task's, whose record could not be read).
#[test]
fn doctor_reports_a_task_it_cannot_read_and_goes_on() {
    let Some((_parent, r)) = nobodys_root("doctor_reports_a_task_it_cannot_read", 0) else {
        return;
    };
    r.open("T2");
    let chown = Command::new("chown").args(["-R", "65534:65534"]).arg(r.tmp.path()).status();
    assert!(chown.unwrap().success());
    let doctor = || {
        let o = as_nobody().arg("doctor").env_clear().env("CIRCE_ROOT", &r.dir).output().unwrap();
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let closed = |rel: &str| {
        let p = r.dir.join(rel);
        assert!(Command::new("chown").arg("0:0").arg(&p).status().unwrap().success());
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    };
    let open = |rel: &str| {
        std::fs::set_permissions(
            r.dir.join(rel),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();
    };
    for file in ["locks/task-T2.lock", "TASKS/T2.status"] {
        closed(file);
        let (code, err) = doctor();
        if err.contains("setpriv:") {
            eprintln!("SKIPPED: setpriv cannot drop privileges here: {err}");
            return;
        }
        assert_eq!(code, 1, "{file}: {err}");
        assert!(err.contains("1 violation(s)") && err.contains(file), "{file}: {err}");
        assert!(!err.contains("is no task's current message"), "{file}: {err}");
        open(file);
    }
}

/// A task's lock held by another command for longer than the lock wait (10 s) is no damage:
/// doctor stops with exit 4 ("locked ... try again"), not a violation `--repair` cannot mend.
#[test]
fn doctor_behind_a_lock_held_too_long_stops_and_says_so() {
    let r = Root::new(0);
    r.open("T1");
    let lock = r.dir.join("locks/task-T1.lock");
    let Ok(mut holder) = Command::new("flock").arg("-x").arg(&lock).args(["sleep", "14"]).spawn()
    else {
        eprintln!("SKIPPED doctor_behind_a_lock_held_too_long: flock is missing");
        return;
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = r.run(None, &["doctor"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(o.code, 4, "{o:?}");
    assert!(o.stderr.contains("locked by another circe process"), "{o:?}");
    assert!(!o.stderr.contains("VIOLATED"), "{o:?}");
}

/// `setpriv` running circe as `nobody` (65534), who has no rights root's files give others.
/// circe run as `nobody` on the root `dir` (as `agent`, when given), durability relaxed.
fn nobody_on<I, S>(dir: &std::path::Path, agent: Option<&str>, args: I) -> std::process::Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut c = as_nobody();
    c.args(args).env_clear().env("CIRCE_ROOT", dir).env("CIRCE_DURABILITY", "relaxed");
    if let Some(a) = agent {
        c.env("CIRCE_AGENT", a);
    }
    c.output().unwrap()
}

fn as_nobody() -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", crate::common::BIN]);
    c
}

/// A folder in /tmp every user may enter (0755; removed when dropped), for a root that other
/// users than root run circe on; `None` (said) when setpriv, which runs them, is missing.
fn open_parent(test: &str) -> Option<tempfile::TempDir> {
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("SKIPPED {test}: setpriv is missing");
        return None;
    }
    let parent = tempfile::Builder::new().prefix("circe-users-").tempdir_in("/tmp").unwrap();
    std::fs::set_permissions(parent.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    Some(parent)
}

/// One agent's INBOX made read-only by hand: a message to all still reaches every other
/// box (the refused copy waits, said so), and lands once the box is mended and repaired.
#[test]
fn a_read_only_inbox_keeps_no_other_box_from_its_copy() {
    let test = "a_read_only_inbox_keeps_no_other_box_from_its_copy";
    let Some((_parent, r)) = nobodys_root(test, 2) else { return };
    let inbox = r.dir.join("AGENTS/engineer/INBOX");
    std::fs::set_permissions(&inbox, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let nobody = |agent: &str, args: &[&str]| nobody_on(&r.dir, Some(agent), args);
    if nobody("coordinator", &["whoami-probe"]).status.code().is_none() {
        eprintln!("SKIPPED {test}: setpriv cannot drop privileges here");
        return;
    }
    let sent =
        nobody("coordinator", &["send", "--to", "all", "--intent", "inform", "--summary", "hi"]);
    let err = String::from_utf8_lossy(&sent.stderr).into_owned();
    assert_eq!(sent.status.code(), Some(1), "{err}");
    assert!(err.contains("the other boxes have their copies"), "{err}");
    let with_copy = |who: &str| {
        std::fs::read_dir(r.dir.join("AGENTS").join(who).join("INBOX"))
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().contains("_inform"))
    };
    for who in ["e1", "e2", "qa", "scribe", "eagle", "rooster"] {
        assert!(with_copy(who), "{who} got no copy while engineer's INBOX was read-only");
    }
    assert!(!with_copy("engineer"));
    std::fs::set_permissions(&inbox, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let repaired = nobody("coordinator", &["doctor", "--repair"]);
    assert_eq!(repaired.status.code(), Some(0), "{}", String::from_utf8_lossy(&repaired.stderr));
    assert!(with_copy("engineer"), "the copy that waited was not delivered");
    // An ask to the engineers, the same way: recorded, so the others may answer it.
    std::fs::set_permissions(&inbox, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let ask = ["send", "--to", "role:engineer", "--intent", "ask", "--summary", "ok?"];
    assert_eq!(nobody("coordinator", &ask).status.code(), Some(1));
    let asks = nobody("coordinator", &["asks", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&asks.stdout).unwrap();
    assert_eq!(listed["asks"].as_array().map(Vec::len), Some(1), "{listed}");
    std::fs::set_permissions(&inbox, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}
