//! `circe archive` from the command line: silent under cron, one run at a time (exit 4
//! naming the holder), dry run, search, restore byte for byte (refusing unsafe members), a
//! broken journal reported and mended by doctor, and tombstones.

use crate::common::Env;

const LATER: &str = "2031-01-01T00:00:00Z";

/// T1 completed (and filed) at the env's clock; T2 still in progress.
fn with_work() -> Env {
    let env = Env::new();
    env.complete_task("T1");
    env.open_task("T2");
    env.as_("engineer", &["claim", "T2"]).ok();
    env
}

/// The one segment of period 2025-11.
fn segment(env: &Env) -> String {
    let mut v: Vec<String> = std::fs::read_dir(env.root().join("ARCHIVE/2025-11"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tar.zst"))
        .collect();
    v.sort();
    v.remove(0)
}

#[test]
fn a_run_is_silent_unless_asked_and_changes_nothing_the_second_time() {
    local_only!(
        "the archive is kept by the local engine (tests/pg/archive.rs: the database engine refuses it)"
    );
    let env = with_work();
    let dry = env.circe(["archive", "--dry-run"]).now(LATER).run();
    dry.ok();
    assert!(dry.stdout.starts_with("would archive 1 task(s)"), "{}", dry.show());
    let o = env.circe(["archive"]).now(LATER).run();
    o.ok();
    assert_eq!((o.stdout.as_str(), o.stderr.as_str()), ("", ""), "under cron a run prints nothing");
    let names = |dir: &str| -> Vec<String> {
        let rd = std::fs::read_dir(env.root().join(dir)).unwrap();
        rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    };
    let tasks = names("TASKS");
    assert!(tasks.iter().any(|f| f == "T2.status"), "{tasks:?}");
    assert!(tasks.iter().all(|f| f.starts_with("T2.")), "{tasks:?}");
    // An archived task's lock file goes with it: locks/ holds what the hot folders hold.
    let locks = names("locks");
    assert!(locks.iter().any(|f| f == "task-T2.lock"), "{locks:?}");
    assert!(!locks.iter().any(|f| f == "task-T1.lock"), "{locks:?}");
    let before = crate::common::tree(&env.root(), &["locks"]);
    let again = env.circe(["--json", "archive"]).now(LATER).run();
    again.ok();
    assert_eq!(again.json()["task_count"], 0);
    crate::common::assert_unchanged(&before, &crate::common::tree(&env.root(), &["locks"]));
    env.circe(["doctor"]).run().ok();
    // The id is not used again; show points to the bundle.
    let o = env.as_(
        "coordinator",
        &["send", "--to", "all", "--intent", "implement_feature", "--task", "T1", "--summary", "x"],
    );
    o.code(3);
    assert!(o.stderr.contains("was archived"), "{}", o.show());
    // Every command about the task says where it went, not "no task".
    for (agent, args) in [
        ("engineer", &["claim", "T1"][..]),
        ("engineer", &["status", "T1", "failed"][..]),
        ("engineer", &["release", "T1"][..]),
        ("engineer", &["take", "T1"][..]),
        ("engineer", &["done", "T1"][..]),
        ("engineer", &["wait", "--for", "status:T1=failed", "--timeout", "1s"][..]),
    ] {
        let o = env.as_(agent, args);
        assert_eq!(o.code, 3, "{}", o.show());
        assert!(
            o.stderr.contains("was archived") && o.stderr.contains("circe show T1"),
            "{}",
            o.show()
        );
    }
    // Refused before anything was locked: no lock file comes back for the archived task.
    let locks = env.ls_all("locks");
    assert!(!locks.iter().any(|f| f == "task-T1.lock"), "{locks:?}");
    // It is completed: a wait for that is met at once.
    env.as_("engineer", &["wait", "--for", "status:T1=completed", "--timeout", "1s"]).ok();
    let show = env.circe(["show", "T1"]).run();
    show.ok();
    assert!(
        show.stdout.contains("bundle: ARCHIVE/") && show.stdout.contains("## Story"),
        "{}",
        show.show()
    );
}

/// A task archived while `doctor` checks it: doctor listed TASKS before the run and locks
/// the task after it (`doctor-slow-tasks` holds that moment open), which makes its lock
/// file again; it finds the task gone, says nothing, and removes the file it made.
#[test]
fn doctor_leaves_no_lock_file_of_a_task_archived_while_it_checks() {
    local_only!(
        "the archive is kept by the local engine (tests/pg/archive.rs: the database engine refuses it)"
    );
    let env = with_work();
    let doctor = std::thread::scope(|s| {
        let d =
            s.spawn(|| env.circe(["doctor"]).var("CIRCE_TEST_BREAK", "doctor-slow-tasks").run());
        std::thread::sleep(std::time::Duration::from_millis(500));
        env.circe(["archive"]).now(LATER).run().ok();
        assert!(!env.ls_all("locks").iter().any(|f| f == "task-T1.lock"));
        d.join().unwrap()
    });
    doctor.ok();
    let locks = env.ls_all("locks");
    assert!(!locks.iter().any(|f| f == "task-T1.lock"), "{locks:?}");
    assert!(locks.iter().any(|f| f == "task-T2.lock"), "{locks:?}");
    env.circe(["doctor"]).run().ok();
}

/// A task archived while a command opens its transaction: the command saw the task before
/// the run and locks it after (`begin-slow` holds that moment open), which makes its lock
/// file again; it finds the task gone, shows it from the archive, and removes the file it made.
#[test]
fn a_command_leaves_no_lock_file_of_a_task_archived_while_it_locks() {
    local_only!(
        "the archive is kept by the local engine (tests/pg/archive.rs: the database engine refuses it)"
    );
    let env = with_work();
    let show = std::thread::scope(|s| {
        let shown =
            s.spawn(|| env.circe(["show", "T1"]).var("CIRCE_TEST_BREAK", "begin-slow").run());
        std::thread::sleep(std::time::Duration::from_millis(500));
        env.circe(["archive"]).now(LATER).run().ok();
        assert!(!env.ls_all("locks").iter().any(|f| f == "task-T1.lock"));
        shown.join().unwrap()
    });
    show.ok();
    assert!(show.stdout.contains("bundle: ARCHIVE/"), "{}", show.show());
    let locks = env.ls_all("locks");
    assert!(!locks.iter().any(|f| f == "task-T1.lock"), "{locks:?}");
    assert!(locks.iter().any(|f| f == "task-T2.lock"), "{locks:?}");
    env.circe(["doctor"]).run().ok();
}

#[test]
fn a_second_run_exits_4_naming_the_holder() {
    local_only!(
        "the archive is kept by the local engine (tests/pg/archive.rs: the database engine refuses it)"
    );
    let env = with_work();
    // Another run holds the lock (flock(1) on the same file), its journal names it.
    std::fs::create_dir_all(env.root().join("ARCHIVE")).unwrap();
    let lock = env.root().join("locks/archive.lock");
    std::fs::write(env.root().join("ARCHIVE/journal.json"), br#"{"v":1,"run":"R","state":"staging","pid":4242,"host":"elsewhere","started_at":"2031-01-01T00:00:00Z","staging":"archive-4242-R"}"#).unwrap();
    let mut holder = std::process::Command::new("flock")
        .arg("--no-fork")
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let o = env.circe(["archive"]).now(LATER).run();
    let _ = holder.kill();
    let _ = holder.wait();
    o.code(4);
    assert!(o.stderr.contains("pid 4242 on elsewhere"), "{}", o.show());
    // The holder gone, the next run rolls its leftovers back and archives.
    let o = env.circe(["--json", "archive"]).now(LATER).run();
    o.ok();
    assert!(o.json()["recovered"].as_array().is_some_and(|a| !a.is_empty()), "{}", o.show());
}

#[test]
fn doctor_reports_a_broken_journal_and_repair_rebuilds_from_the_tree() {
    local_only!(
        "the archive is kept by the local engine (tests/pg/archive.rs: the database engine refuses it)"
    );
    let env = with_work();
    env.circe(["archive"]).now(LATER).run().ok();
    std::fs::write(env.root().join("ARCHIVE/journal.json"), b"\x00garbage{").unwrap();
    let d = env.circe(["doctor"]).run();
    d.code(1);
    assert!(d.stderr.contains("invariant 8") && d.stderr.contains("journal"), "{}", d.show());
    env.circe(["doctor", "--repair"]).run().ok();
    env.circe(["doctor"]).run().ok();
    // A segment the index does not name (a run cut after placing it, before its commit
    // point, its journal then damaged) is reported, and rolled back: its originals are all
    // in place.
    let seg = segment(&env);
    env.complete_task("T3");
    let cut = env.circe(["archive"]).now(LATER).var("CIRCE_CRASH_AT", "archive.placed").run();
    assert_ne!(cut.code, 0, "{}", cut.show());
    std::fs::write(env.root().join("ARCHIVE/journal.json"), b"\x00garbage{").unwrap();
    let d = env.circe(["doctor"]).run();
    d.code(1);
    assert!(d.stderr.contains("journal.json is broken"), "{}", d.show());
    env.circe(["doctor", "--repair"]).run().ok();
    env.circe(["doctor"]).run().ok();
    let segments = std::fs::read_dir(env.root().join("ARCHIVE/2025-11"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tar.zst"))
        .count();
    assert_eq!(
        (segments, segment(&env)),
        (1, seg.clone()),
        "the cut run's segment was rolled back"
    );
    assert!(env.root().join("TASKS/T3.status").is_file(), "its originals stay");
    env.circe(["archive", "verify"]).run().ok();
    // A segment cut short cannot be mended: doctor says so, and --repair does not send the
    // reader back to itself.
    let path = env.root().join("ARCHIVE/2025-11").join(&seg);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(100).unwrap();
    let d = env.circe(["doctor"]).run();
    d.code(1);
    assert!(
        d.stderr.contains("the index says") && d.stderr.contains("from a backup"),
        "{}",
        d.show()
    );
    // Nothing here is --repair's to mend, and the hint does not send the reader to it.
    let none = "hint: none of these is for `--repair` to mend: each line above says what to do";
    assert!(d.stderr.contains(none), "{}", d.show());
    let d = env.circe(["doctor", "--repair"]).run();
    d.code(1);
    assert!(
        d.stderr.contains("beyond --repair") && !d.stderr.contains("run `circe doctor --repair`"),
        "{}",
        d.show()
    );
}

/// A tombstone gone (so the archived id could be opened again) is reported by doctor.
#[test]
fn doctor_reports_a_missing_tombstone() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    env.circe(["archive"]).now(LATER).run().ok();
    env.circe(["doctor"]).run().ok();
    std::fs::remove_file(env.root().join("ARCHIVE/tombstones/T1")).unwrap();
    let d = env.circe(["doctor"]).run();
    d.code(1);
    assert!(
        d.stderr.contains("1 archived task(s) have no tombstone in ARCHIVE/tombstones/ (T1)"),
        "{}",
        d.show()
    );
    // `archive verify` reads the segments, and names the task.
    let v = env.circe(["archive", "verify"]).run();
    v.code(1);
    assert!(v.stderr.contains("task T1 has no tombstone"), "{}", v.show());
}

/// A task that changed while a run removed what it archived is kept in place and archived
/// again: two archived copies, one tombstone, and doctor finds nothing wrong.
#[test]
fn a_task_kept_by_a_run_and_archived_again_leaves_doctor_clean() {
    local_only!("the archive is kept by the local engine; a file is touched by hand");
    let env = with_work();
    env.circe(["archive"]).now(LATER).var("CIRCE_CRASH_AT", "archive.removing").run().code(86);
    // Its message changes before the run is finished (a person adds a line).
    let name = env.ls("LOGS").into_iter().find(|n| n.ends_with("_T1.md")).unwrap();
    let message = env.root().join("LOGS").join(name);
    let mut text = std::fs::read(&message).unwrap();
    text.extend_from_slice(b"a line added by hand\n");
    std::fs::write(&message, text).unwrap();
    // The run finishing the first keeps T1 (and says so), then archives it again.
    let run = env.circe(["--json", "archive"]).now(LATER).run();
    run.ok();
    let said = run.json()["recovered"].to_string();
    assert!(said.contains("kept in place, changed since they were archived: T1"), "{said}");
    assert!(!env.root().join("TASKS/T1.status").exists(), "archived again");
    let index = env.read("ARCHIVE/index.jsonl");
    let holding = index.lines().filter(|l| l.contains("\"tasks\":1")).count();
    assert_eq!(holding, 2, "two archived copies of T1: {index}");
    assert_eq!(env.ls_all("ARCHIVE/tombstones"), ["T1"]);
    let d = env.circe(["doctor"]).run();
    assert_eq!(d.code, 0, "{}", d.show());
}

#[test]
fn search_and_restore_byte_for_byte() {
    local_only!(
        "the archive is kept by the local engine (tests/pg/archive.rs: the database engine refuses it)"
    );
    let env = with_work();
    let ticket = env.record("T1").message;
    let original = std::fs::read(env.root().join("AGENTS/engineer/INBOX").join(&ticket)).unwrap();
    let status = env.read("TASKS/T1.status");
    env.circe(["archive"]).now(LATER).run().ok();
    let s = env.circe(["--json", "archive", "search", "T1"]).run();
    s.ok();
    assert!(s.stdout.contains(&ticket), "{}", s.show());
    env.circe(["archive", "search", "--date", "2025-11"]).run().ok();
    let shown = env.circe(["--json", "show", "T1"]).run().json();
    let members = format!("{}/tasks/T1/", segment(&env).trim_end_matches(".tar.zst"));
    assert_eq!(shown["bundle"], members.as_str(), "{shown}");
    env.circe(["archive", "search", "--text", "nothing-like-this"]).run().code(5);
    // A month or day that is none, and a limit of nothing, are usage errors.
    for bad in [
        &["--date", "2025-13"][..],
        &["--date", "2025"],
        &["--date", "2025-11-2"],
        &["--limit", "0", "T1"],
    ] {
        env.circe([&["archive", "search"][..], bad].concat()).run().code(2);
    }
    let to = env.path().join("restored");
    env.circe(["archive", "restore", "T1", "--to", to.to_str().unwrap()]).run().ok();
    assert_eq!(std::fs::read(to.join("LOGS").join(&ticket)).unwrap(), original);
    assert_eq!(std::fs::read_to_string(to.join("TASKS/T1.status")).unwrap(), status);
    // Never over an existing file, and nothing written when one is there: a folder holding
    // only the task's message gets no record either.
    env.circe(["archive", "restore", "T1", "--to", to.to_str().unwrap()]).run().code(4);
    let part = env.path().join("partly");
    std::fs::create_dir_all(part.join("LOGS")).unwrap();
    std::fs::write(part.join("LOGS").join(&ticket), b"mine").unwrap();
    let o = env.circe(["archive", "restore", "T1", "--to", part.to_str().unwrap()]).run();
    o.code(4);
    assert!(o.stderr.contains("nothing was written"), "{}", o.show());
    assert!(!part.join("TASKS").exists(), "no record written beside the refusal");
    // Not into the root itself (the task would be back beside its tombstone).
    let o = env.circe(["archive", "restore", "T1", "--to", env.root().to_str().unwrap()]).run();
    o.code(3);
    assert!(o.stderr.contains("this root's own folder"), "{}", o.show());
    // Nor a folder inside it that does not exist yet, named relatively.
    let rel = format!("{}/sub/new", env.root().file_name().unwrap().to_str().unwrap());
    let o = env.circe(["archive", "restore", "T1", "--to", &rel]).run();
    o.code(3);
    assert!(!env.root().join("sub").exists(), "{}", o.show());
    let back = format!("nope/../{}", env.root().file_name().unwrap().to_str().unwrap());
    env.circe(["archive", "restore", "T1", "--to", &back]).run().code(3);
}

/// A member whose bytes differ from its manifest (same size, one word changed) is refused
/// by restore, and nothing is written.
#[test]
fn restore_checks_each_file_against_its_manifest() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    env.circe(["archive"]).now(LATER).run().ok();
    let dir = env.root().join("ARCHIVE/2025-11");
    let seg = segment(&env);
    let work = tempfile::tempdir().unwrap();
    let tar = |args: &[&str]| {
        let st = std::process::Command::new("tar").current_dir(work.path()).args(args).status();
        assert!(st.unwrap().success(), "tar {args:?}");
    };
    let seg_path = dir.join(&seg);
    // The members in their order, to write them back the same way (files only).
    let list = std::process::Command::new("tar").args(["--zstd", "-tf"]).arg(&seg_path).output();
    std::fs::write(work.path().join("members"), list.unwrap().stdout).unwrap();
    tar(&["--zstd", "-xf", seg_path.to_str().unwrap()]);
    let stem = seg.trim_end_matches(".tar.zst");
    let status = walk(&work.path().join(stem)).into_iter().find(|p| p.ends_with("TASKS/T1.status"));
    let status = status.expect("the archived record");
    let text = std::fs::read_to_string(&status).unwrap();
    std::fs::write(&status, text.replace("completed", "cOmpleted")).unwrap();
    tar(&["--zstd", "-cf", seg_path.to_str().unwrap(), "--no-recursion", "-T", "members"]);
    let to = env.path().join("out");
    let o = env.circe(["archive", "restore", "T1", "--to", to.to_str().unwrap()]).run();
    o.code(3);
    assert!(o.stderr.contains("does not match its manifest"), "{}", o.show());
    assert!(!to.exists(), "nothing may be written");
    // Without its manifest, nothing is restored unchecked.
    std::fs::write(&status, text).unwrap();
    let members = std::fs::read_to_string(work.path().join("members")).unwrap();
    let kept: String = members
        .lines()
        .filter(|l| !l.ends_with("manifest.json"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(work.path().join("members"), kept).unwrap();
    tar(&["--zstd", "-cf", seg_path.to_str().unwrap(), "--no-recursion", "-T", "members"]);
    let o = env.circe(["archive", "restore", "T1", "--to", to.to_str().unwrap()]).run();
    o.code(3);
    assert!(o.stderr.contains("manifest is missing"), "{}", o.show());
    assert!(!to.exists(), "nothing may be written");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn restore_refuses_members_with_unsafe_paths() {
    local_only!(
        "the archive is kept by the local engine (tests/pg/archive.rs: the database engine refuses it)"
    );
    let env = with_work();
    env.circe(["archive"]).now(LATER).run().ok();
    let dir = env.root().join("ARCHIVE/2025-11");
    let seg = segment(&env);
    let stem = seg.trim_end_matches(".tar.zst").to_string();
    // A hostile segment: a member climbing out of the segment's folder.
    let evil = tempfile::tempdir().unwrap();
    let inner = evil.path().join(&stem).join("tasks/T1");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::write(inner.join("x"), b"pwned").unwrap();
    let st = std::process::Command::new("tar")
        .current_dir(evil.path())
        .args(["--zstd", "-cf"])
        .arg(dir.join(&seg))
        .arg("--transform")
        .arg(format!("s,^{stem}/tasks/T1/x,{stem}/tasks/T1/../../../../escaped,"))
        .arg(format!("{stem}/tasks/T1/x"))
        .status()
        .unwrap();
    assert!(st.success());
    let to = env.path().join("out");
    let o = env.circe(["archive", "restore", "T1", "--to", to.to_str().unwrap()]).run();
    o.code(3);
    assert!(o.stderr.contains("unsafe path"), "{}", o.show());
    assert!(!to.exists() && !env.path().join("escaped").exists(), "nothing may be written");
}

/// Event ids go on increasing across archive runs: a run that moves a segment newer than
/// the one LOGS keeps (for a task that stays) does not let the next event take an archived
/// id, so a consumer's cursor sees what comes next.
#[test]
fn event_ids_are_never_given_again_after_the_archive_takes_a_newer_segment() {
    local_only!("the archive is kept by the local engine");
    let env = Env::new();
    env.open_task("P-1");
    env.open_task("A-1");
    env.as_("engineer", &["claim", "A-1"]).ok();
    env.as_("engineer", &["status", "A-1", "in_progress"]).ok();
    env.as_("engineer", &["status", "A-1", "failed"]).ok();
    env.circe(["archive"]).now("2031-01-01T00:00:00Z").run().ok();
    let ids = |o: &crate::common::Out| -> Vec<u64> {
        o.stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_u64().unwrap())
            .collect()
    };
    let first =
        env.circe(["watch", "--all", "--cursor", "mon", "--from-start", "--once", "--json"]).run();
    first.ok();
    let seen = *ids(&first).iter().max().expect("events before the second run");
    env.circe(["archive"]).now("2031-03-01T00:00:00Z").run().ok();
    env.as_("coordinator", &["send", "--to", "qa", "--intent", "inform", "--summary", "x"]).ok();
    let next = env.circe(["watch", "--all", "--cursor", "mon", "--once", "--json"]).run();
    next.ok();
    let got = ids(&next);
    assert!(
        !got.is_empty() && got.iter().all(|&i| i > seen),
        "after #{seen}: {got:?}\n{}",
        next.show()
    );
    env.circe(["doctor"]).now("2031-03-01T00:00:00Z").run().ok();
}

/// A segment that cannot be read is passed over by a search (with a warning), and the
/// others are still searched.
#[test]
fn a_search_passes_over_a_damaged_segment() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    env.circe(["archive"]).now(LATER).run().ok();
    env.as_("engineer", &["status", "T2", "in_progress"]).ok();
    env.as_("engineer", &["status", "T2", "failed"]).ok();
    env.circe(["archive"]).now("2032-01-01T00:00:00Z").run().ok();
    let first = segment(&env);
    let lists: Vec<_> = std::fs::read_dir(env.root().join("ARCHIVE/2025-11"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(first.trim_end_matches(".tar.zst")))
        .filter(|p| !p.to_string_lossy().ends_with(".tar.zst"))
        .collect();
    assert_eq!(lists.len(), 1, "one member list beside the first segment: {lists:?}");
    std::fs::write(&lists[0], b"not zstd").unwrap();
    let o = env.circe(["archive", "search", "T2"]).run();
    o.ok();
    assert!(o.stdout.contains("T2"), "{}", o.show());
    assert!(
        o.stderr.contains("passed over") && o.stderr.contains("archive verify"),
        "{}",
        o.show()
    );
    let o = env.circe(["archive", "search", "T2", "--json"]).run();
    assert_eq!(o.json()["passed_over"].as_array().map(Vec::len), Some(1), "{}", o.show());
    // What lay only in the damaged segment: not "nothing matches" alone.
    let o = env.circe(["archive", "search", "T1"]).run();
    o.code(5);
    assert!(o.stderr.contains("could not be read"), "{}", o.show());
    // A command that only looks in the archive on the way (an answer to an id found
    // nowhere) says nothing of it.
    let args = ["send", "--to", "qa", "--intent", "answer", "--summary", "x", "--in-reply-to"];
    let sent = env.as_("engineer", &[&args[..], &["20251121T170000000Z-nowhere1"]].concat());
    sent.code(5);
    assert!(!sent.stderr.contains("passed over"), "{}", sent.show());
}

/// Once retention removed a task's segment (with its period's summaries), `show` says so,
/// and the task's id stays taken.
#[test]
fn a_task_whose_segment_retention_removed_is_still_told() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    env.circe(["archive"]).now(LATER).run().ok();
    let cfg = env.read("circe.yaml") + "archive:\n  keep: 30d\n";
    env.set_config(&cfg);
    env.circe(["archive"]).now("2032-06-01T00:00:00Z").run().ok();
    assert_eq!(segment_or_none(&env), "", "retention removed the segment");
    let o = env.circe(["show", "T1"]).run();
    o.code(5);
    assert!(
        o.stderr.contains("retention removed it") && o.stderr.contains("tombstone"),
        "{}",
        o.show()
    );
    env.as_(
        "coordinator",
        &[
            "send",
            "--to",
            "all",
            "--intent",
            "implement_feature",
            "--task",
            "T1",
            "--summary",
            "again",
        ],
    )
    .code(3);
}

/// The first segment's name, or "" when none is left.
fn segment_or_none(env: &Env) -> String {
    let dir = env.root().join("ARCHIVE/2025-11");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.retain(|n| n.ends_with(".tar.zst"));
    v.sort();
    v.into_iter().next().unwrap_or_default()
}

/// A message of no task, archived on its own, is shown with its text.
#[test]
fn an_archived_message_of_no_task_is_shown_with_its_text() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    let sent = env.as_(
        "engineer",
        &["send", "--to", "qa", "--intent", "inform", "--summary", "loose words", "--json"],
    );
    let id = sent.json()["msg_id"].as_str().unwrap().to_string();
    env.as_("qa", &["done", &id]).ok();
    // One sent at a time with milliseconds keeps them in the archive.
    let ms = env
        .circe(["send", "--to", "qa", "--intent", "inform", "--summary", "at a fraction", "--json"])
        .agent("engineer")
        .now("2025-11-21T17:00:00.409Z")
        .run()
        .json()["msg_id"]
        .as_str()
        .unwrap()
        .to_string();
    env.as_("qa", &["done", &ms]).ok();
    env.circe(["archive"]).now(LATER).run().ok();
    assert!(env.ls("LOGS").iter().all(|f| !f.contains("inform")), "the message left LOGS");
    let o = env.circe(["show", &id, "--json"]).run();
    o.ok();
    assert!(o.json()["text"].as_str().unwrap_or_default().contains("loose words"), "{}", o.show());
    let found = env.circe(["--json", "archive", "search", &ms]).run();
    assert_eq!(
        found.json()["hits"][0]["created_at"],
        "2025-11-21T17:00:00.409Z",
        "{}",
        found.show()
    );
}

/// Ids go on after retention removed every archived segment (and their index lines): the
/// newest id removed is kept, so the next event does not start again at 1.
#[test]
fn event_ids_go_on_after_retention_removed_the_segments() {
    local_only!("the archive is kept by the local engine");
    let env = Env::new();
    env.open_task("A-1");
    env.as_("engineer", &["claim", "A-1"]).ok();
    env.as_("engineer", &["status", "A-1", "in_progress"]).ok();
    env.as_("engineer", &["status", "A-1", "failed"]).ok();
    let cfg = env.read("circe.yaml") + "archive:\n  keep: 30d\n";
    env.set_config(&cfg);
    env.circe(["archive"]).now("2032-01-01T00:00:00Z").run().ok();
    let before = env.circe(["--json", "cursors"]).run().json()["last_event_id"].as_u64().unwrap();
    assert!(before >= 5, "{before}");
    // The second run takes the log segments into a segment of its own; the third, a year
    // on, removes that one (and its index line) by retention.
    env.circe(["archive"]).now("2033-01-01T00:00:00Z").run().ok();
    env.circe(["archive"]).now("2034-01-01T00:00:00Z").run().ok();
    let index = env.read("ARCHIVE/index.jsonl");
    assert!(!index.contains("\"last_event\""), "no segment left names an event: {index}");
    env.as_("coordinator", &["send", "--to", "qa", "--intent", "inform", "--summary", "x"]).ok();
    let after = env.circe(["--json", "cursors"]).run().json()["last_event_id"].as_u64().unwrap();
    assert!(after > before, "an id at or below #{before} was given again: #{after}");
}

/// A damaged `ARCHIVE/last_event` would stop the first append after a log rotation (ids
/// could repeat): doctor names it as a violation with what to write back, rather than
/// failing on it.
#[test]
fn doctor_names_a_damaged_last_event_as_a_violation() {
    local_only!("the archive is kept by the local engine");
    let env = Env::new();
    env.open_task("A-1");
    std::fs::create_dir_all(env.root().join("ARCHIVE")).unwrap();
    std::fs::write(env.root().join("ARCHIVE/last_event"), "garbage\n").unwrap();
    let doc = env.circe(["doctor"]).run();
    assert_eq!(doc.code, 1, "{}", doc.stderr);
    assert!(
        doc.stderr.contains("invariant 8") && doc.stderr.contains("last_event"),
        "{}",
        doc.stderr
    );
    assert!(doc.stderr.contains("write it back"), "{}", doc.stderr);
    let json = env.circe(["--json", "doctor"]).run().json();
    assert_eq!(json["open"], 1, "{json}");
    std::fs::write(env.root().join("ARCHIVE/last_event"), "1\n").unwrap();
    env.circe(["doctor"]).run().ok();
}

#[test]
fn a_chat_channel_never_archived_stays_until_its_file_is_older_than_the_cutoff() {
    local_only!(
        "the channel's file is the local engine's (tests/pg/chat.rs archives the database's)"
    );
    let env = Env::new();
    env.as_("engineer", &["chat", "say", "--to", "qa", "started today"]).ok();
    // The env's clock is a year before the file was made: the channel is new at that time.
    env.circe(["archive"]).run().ok();
    assert_eq!(env.read("chat.md"), "[engineer-to-qa]: started today\n");
    assert!(!env.root().join("LOGS/chat").exists() || env.ls_all("LOGS/chat").is_empty());
    // Seven days after the file was made, it goes (and a new channel starts).
    env.circe(["archive"]).now(LATER).run().ok();
    assert_eq!(env.read("chat.md"), "");
    assert_eq!(env.ls_all("LOGS/chat").len(), 2, "the archive and its record");
}

/// A dry run counts an old chat archive as the run takes it: its two files (the archive
/// and its record) and their bytes.
#[test]
fn a_dry_run_counts_the_chat_files_the_run_takes() {
    local_only!(
        "the channel's file is the local engine's (tests/pg/chat.rs archives the database's)"
    );
    let env = Env::new();
    env.as_("engineer", &["chat", "say", "--to", "qa", "started today"]).ok();
    // The first run archives the channel (its file is older than the cutoff then) ...
    env.circe(["archive"]).now(LATER).run().ok();
    assert_eq!(env.ls_all("LOGS/chat").len(), 2, "the archive and its record");
    env.as_("engineer", &["chat", "say", "--to", "qa", "and later"]).ok();
    // ... and a run a year on takes that archive into a segment.
    let much_later = "2032-01-01T00:00:00Z";
    let dry = env.circe(["--json", "archive", "--dry-run"]).now(much_later).run();
    dry.ok();
    let real = env.circe(["--json", "archive"]).now(much_later).run();
    real.ok();
    let (dry, real) = (dry.json(), real.json());
    assert_eq!(real["chat_file_count"], 2, "{real}");
    for key in ["chat_file_count", "bytes", "log_segment_count", "message_count"] {
        assert_eq!(dry[key], real[key], "{key}: dry run {dry}, run {real}");
    }
}

/// `wait --for reply:ID` on a question archived with its thread answers at once (exit 3,
/// saying where its replies are) instead of waiting for ever; `--new` still waits for a
/// reply sent from then on.
#[test]
fn waiting_for_a_reply_to_an_archived_question_says_so() {
    local_only!("a database root keeps no archive");
    let env = Env::new();
    let q = env.as_(
        "qa",
        &["send", "--to", "engineer", "--intent", "question", "--summary", "db?", "--json"],
    );
    q.ok();
    let id = q.json()["msg_id"].as_str().unwrap().to_string();
    let answer =
        ["send", "--to", "agent:qa", "--intent", "answer", "--in-reply-to", &id, "--summary", "pg"];
    env.as_("engineer", &answer).ok();
    env.as_("engineer", &["done", &id]).ok();
    let a = env.as_("qa", &["inbox", "--json"]);
    let file = a.json()["messages"][0]["file"].as_str().unwrap().to_string();
    env.as_("qa", &["done", &file]).ok();
    env.circe(["archive"]).now(LATER).run().ok();
    let reply = format!("reply:{id}");
    let w = env.circe(["wait", "--for", &reply, "--timeout", "2s"]).agent("qa").now(LATER).run();
    w.code(3);
    assert!(w.stderr.contains("was archived with its thread"), "{}", w.show());
    let fresh = ["wait", "--for", &reply, "--new", "--timeout", "200ms"];
    env.circe(fresh).agent("qa").now(LATER).run().code(7);
}

/// Two unread copies of one message of a finished task (one name in two INBOXes: a message
/// to a role of two agents) are both filed and archived: the second under a numbered name,
/// as `done` files it. A run does not stop at the second copy, for this task or any other.
#[test]
fn two_copies_of_one_message_under_one_name_are_both_archived() {
    local_only!("the archive is kept by the local engine");
    let env = Env::new();
    env.circe(["agent", "add", "c2", "--role", "coordinator"]).run().ok();
    env.complete_task("T1");
    let said = ["send", "--to", "role:coordinator", "--intent", "inform", "--task", "T1"];
    env.as_("engineer", &[&said[..], &["--summary", "both read this"]].concat()).ok();
    let name = env.ls("AGENTS/c2/INBOX").remove(0);
    assert!(env.ls("AGENTS/coordinator/INBOX").contains(&name), "one name, two copies");
    env.circe(["archive"]).now(LATER).run().ok();
    assert!(env.ls("AGENTS/c2/INBOX").is_empty() && env.ls("AGENTS/coordinator/INBOX").is_empty());
    let found = env.circe(["--json", "archive", "search", "T1"]).run();
    let text = found.ok().stdout.clone();
    let stem = name.trim_end_matches(".md");
    assert!(text.contains(&format!("{stem}.md")), "{text}");
    assert!(text.contains(&format!("{stem}.2.md")), "{text}");
    env.circe(["doctor"]).run().ok();
}

/// A send with its own msg id, run again after `circe archive` took the first: not
/// delivered twice; the same send is answered as delivered before (where it lies now), a
/// different message with that id is a conflict.
#[test]
fn a_msg_id_the_archive_holds_is_not_sent_again() {
    local_only!("the archive is kept by the local engine");
    let env = Env::new();
    let send_to = |agent: &str, to: &str, summary: &str| {
        let args = ["--json", "send", "--to", to, "--intent", "inform", "--msg-id", "fixed-1"];
        env.circe([&args[..], &["--summary", summary]].concat()).agent(agent).run()
    };
    let send = |agent: &str, summary: &str| send_to(agent, "agent:qa", summary);
    send("engineer", "hello").ok();
    env.as_("qa", &["done", "fixed-1"]).ok();
    env.circe(["archive"]).now(LATER).run().ok();
    assert!(env.ls("LOGS").iter().all(|f| !f.contains("engineer-qa")), "archived");
    let again = send("engineer", "hello");
    let j = again.ok().json();
    assert_eq!(j["already_delivered"], true, "{j}");
    assert!(j["delivered"][0]["box"].as_str().unwrap().starts_with("archive:"), "{j}");
    assert!(env.ls("AGENTS/qa/INBOX").is_empty(), "not delivered again");
    // Another sender, another recipient, another text: each a conflict, nothing sent.
    for other in [
        send("coordinator", "hello"),
        send_to("engineer", "agent:coordinator", "hello"),
        send("engineer", "something else"),
    ] {
        assert_eq!(other.code, 4, "{}", other.show());
    }
    assert!(env.ls("AGENTS/qa/INBOX").is_empty());
    assert!(env.ls("AGENTS/coordinator/INBOX").is_empty());
}

/// A segment the index does not name while its originals are gone (the index's line lost,
/// or the index put back from an older backup) holds the only copy: neither `doctor
/// --repair` nor the next run removes it (a run cut before its commit point, whose
/// originals are all in place, is rolled back as before); doctor names it, and with the
/// index put back all is found again.
#[test]
fn a_segment_the_index_lost_is_kept_not_rolled_back() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    env.circe(["archive"]).now(LATER).run().ok();
    let seg = segment(&env);
    // A retention mark left beside a segment the index still names (its run failed before
    // the rewrite) is cleared by the next run: it never speaks for a later loss.
    let mark = env.root().join("ARCHIVE/2025-11").join(format!("{seg}.expiring"));
    std::fs::write(&mark, b"").unwrap();
    // So is a member list whose segment a rollback removed before it was cut off.
    let stray =
        env.root().join("ARCHIVE/2025-11/2025-11.20310101T000000000Z-gone0000.index.jsonl.zst");
    std::fs::write(&stray, b"x").unwrap();
    env.circe(["archive"]).now(LATER).run().ok();
    assert!(!mark.exists(), "the stale mark was cleared");
    assert!(!stray.exists(), "the stray member list was cleared");
    let index = env.root().join("ARCHIVE/index.jsonl");
    let backup = std::fs::read(&index).unwrap();
    std::fs::write(&index, b"").unwrap();
    let d = env.circe(["doctor", "--repair"]).run();
    assert_eq!(d.code, 1, "{}", d.show());
    assert!(d.stderr.contains(&format!("ARCHIVE/2025-11/{seg} is a segment")), "{}", d.show());
    assert!(d.stderr.contains("holds the only copy, kept"), "{}", d.show());
    env.circe(["archive"]).now(LATER).run().ok();
    assert!(env.root().join("ARCHIVE/2025-11").join(&seg).is_file(), "the only copy was removed");
    std::fs::write(&index, backup).unwrap();
    env.circe(["doctor"]).run().ok();
    env.circe(["archive", "search", "T1"]).run().ok();
}

/// A tombstone of a newer circe's format is refused (exit 3, upgrade) by every command
/// that meets the archived id, not taken for a missing task.
#[test]
fn a_tombstone_of_a_newer_format_is_refused_everywhere() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    env.circe(["archive"]).now(LATER).run().ok();
    let stone = env.root().join("ARCHIVE/tombstones/T1");
    let text = std::fs::read_to_string(&stone).unwrap();
    assert!(text.contains("\"v\":1"), "{text}");
    std::fs::write(&stone, text.replace("\"v\":1", "\"v\":9")).unwrap();
    let open = ["send", "--to", "role:engineer", "--intent", "implement_feature", "--task", "T1"];
    for (agent, args) in [
        ("coordinator", &[&open[..], &["--summary", "again"]].concat()),
        ("engineer", &vec!["claim", "T1"]),
        ("engineer", &vec!["status", "T1", "in_progress"]),
    ] {
        let o = env.as_(agent, args);
        assert_eq!(o.code, 3, "{}", o.show());
        assert!(o.stderr.contains("archive format 9"), "{}", o.show());
    }
}

/// Retention failing at each of its I/O steps (a mark, a sync, the index, a removal): the
/// next run finishes or undoes it, so the expired segment is gone, no mark is left, and
/// doctor is clean; never an expired segment kept as "the only copy".
#[test]
fn retention_failing_at_any_step_is_finished_by_the_next_run() {
    local_only!("the archive is kept by the local engine");
    for n in 1..=12 {
        let env = with_work();
        env.circe(["archive"]).now(LATER).run().ok();
        let cfg = env.read("circe.yaml");
        env.set_config(&format!("{cfg}archive:\n  keep: 30d\n"));
        let much_later = "2031-06-01T00:00:00Z";
        let failed =
            env.circe(["archive"]).now(much_later).var("CIRCE_FAIL_IO", &n.to_string()).run();
        let again = env.circe(["archive"]).now(much_later).run();
        assert_eq!(again.code, 0, "CIRCE_FAIL_IO={n}: {}\n{}", failed.show(), again.show());
        let left: Vec<String> = std::fs::read_dir(env.root().join("ARCHIVE/2025-11"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".tar.zst") || f.ends_with(".expiring"))
            .collect();
        assert!(left.is_empty(), "CIRCE_FAIL_IO={n}: {left:?}\n{}", failed.show());
        let d = env.circe(["doctor"]).run();
        assert_eq!(d.code, 0, "CIRCE_FAIL_IO={n}: {}", d.show());
    }
}

/// The global flags (`--json`, `--root`, `--agent`) stand anywhere, also between `archive`
/// and its subcommand; the run's own flags do not go with a subcommand (exit 2, said so).
#[test]
fn global_flags_stand_before_an_archive_subcommand() {
    local_only!("a database root keeps no archive");
    let env = Env::new();
    let o = env.circe(["archive", "--json", "verify"]).run();
    assert_eq!(o.code, 0, "{}", o.show());
    assert!(o.json()["segment_count"].is_u64(), "{}", o.stdout);
    let o = env.circe(["archive", "--dry-run", "verify"]).run();
    assert_eq!(o.code, 2, "{}", o.show());
    assert!(o.stderr.contains("belong to `circe archive` itself"), "{}", o.show());
}

/// A loose message whose file name holds a line break is archived like any other: the
/// run's own lists are read by lines, and such a name once left the run staged and its
/// journal behind (exit 0, and doctor reported a run cut off after every cron run).
#[test]
fn a_file_name_with_a_line_break_is_archived() {
    local_only!("the archive is kept by the local engine");
    let env = Env::new();
    let text = "---\nfrom: coordinator\nto: engineer\ntype: inform\nstatus: new\ntimestamp: 2025-11-21T17:00:00Z\nmsg-id: nl-1\n---\nbody\n";
    std::fs::write(env.root().join("LOGS/a\nb.md"), text).unwrap();
    env.circe(["archive"]).now(LATER).run().ok();
    assert!(!env.root().join("LOGS/a\nb.md").exists());
    assert!(!env.root().join("ARCHIVE/journal.json").exists());
    env.circe(["doctor"]).now(LATER).run().ok();
    let o = env.circe(["--json", "archive", "search", "nl-1"]).run();
    o.ok();
    assert!(o.stdout.contains("LOGS/a\\nb.md"), "{}", o.show());
}

/// `export tx` writes the archived messages too: the export after a run is the one before
/// it, file for file and byte for byte, and says how many came from the archive.
#[test]
fn an_export_writes_the_archived_messages_too() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    let files = |dir: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| {
                (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let before = env.path().join("before");
    env.circe(["export", "tx", before.to_str().unwrap()]).now(LATER).run().ok();
    env.circe(["archive"]).now(LATER).run().ok();
    let after = env.path().join("after");
    let o = env.circe(["--json", "export", "tx", after.to_str().unwrap()]).now(LATER).run();
    o.ok();
    assert_eq!(o.stderr, "", "nothing left out: {}", o.show());
    let (b, a) = (files(&before), files(&after));
    assert!(b.len() >= 2, "{b:?}");
    assert_eq!(b, a, "{}", o.show());
    let archived = o.json()["archived_count"].as_u64().unwrap();
    assert!(archived >= 1 && archived < a.len() as u64, "{}", o.stdout);
}

/// `archive search --date` finds a message by the month it was written, also when its task
/// ended (and was archived) in a later month: a task opened in November and completed in
/// December lies in December's segment.
#[test]
fn a_search_by_date_finds_a_task_written_a_month_before_it_ended() {
    local_only!("the archive is kept by the local engine");
    let env = Env::new();
    env.open_task("T1");
    let dec = "2025-12-05T10:00:00Z";
    for args in [
        &["claim", "T1"][..],
        &["status", "T1", "in_progress"],
        &["check", "T1", "tests_passed=true"],
        &["status", "T1", "completed"],
        &["done", "T1"],
    ] {
        env.at(dec, "engineer", args).ok();
    }
    env.circe(["archive"]).now(LATER).run().ok();
    let found = env.circe(["--json", "archive", "search", "--date", "2025-11"]).run();
    found.ok();
    let ticket = "implement-feature_T1.md";
    assert!(found.stdout.contains(ticket), "{}", found.show());
    // A month after the task ended holds none of it.
    env.circe(["archive", "search", "--date", "2026-01"]).run().code(5);
}

#[test]
fn a_search_cut_by_its_limit_says_how_many_more_and_how_to_see_them() {
    local_only!("the archive is kept by the local engine");
    let env = Env::new();
    env.complete_task("T1");
    env.complete_task("T2");
    env.circe(["archive"]).now(LATER).run().ok();
    let all = env.circe(["--json", "archive", "search", "--date", "2025-11"]).now(LATER).run();
    all.ok();
    let n = all.json()["hit_count"].as_u64().unwrap();
    assert!(n >= 2, "{}", all.show());
    assert_eq!(all.json()["truncated"], false, "{}", all.show());
    assert_eq!(all.json()["hits"].as_array().unwrap().len() as u64, n);
    let cut =
        env.circe(["archive", "search", "--date", "2025-11", "--limit", "1"]).now(LATER).run();
    cut.ok();
    assert_eq!(cut.stdout.lines().count(), 1, "{}", cut.show());
    let more = format!("{} more hit(s) not shown", n - 1);
    assert!(cut.stderr.contains(&more), "{}", cut.show());
    assert!(cut.stderr.contains(&format!("`--limit {n}` lists them all")), "{}", cut.show());
    let cut = env
        .circe(["--json", "archive", "search", "--date", "2025-11", "--limit", "1"])
        .now(LATER)
        .run();
    assert_eq!(
        (cut.json()["hit_count"].as_u64(), &cut.json()["truncated"]),
        (Some(n), &serde_json::json!(true)),
        "{}",
        cut.show()
    );
}

/// `--text` alone looks in the member lists' fields, not in what an archived chat line
/// says: a miss there points to `--in-files`, which finds it.
#[test]
fn a_text_search_that_misses_archived_chat_points_to_in_files() {
    local_only!(
        "the channel's file is the local engine's (tests/pg/chat.rs archives the database's)"
    );
    let env = Env::new();
    env.as_("engineer", &["chat", "say", "--to", "qa", "zebrafish ready"]).ok();
    env.circe(["archive"]).now(LATER).run().ok();
    env.circe(["archive"]).now("2032-01-01T00:00:00Z").run().ok();
    let miss = env.circe(["archive", "search", "--text", "zebrafish"]).run();
    miss.code(5);
    assert!(miss.stderr.contains("add `--in-files`"), "{}", miss.show());
    assert!(!miss.stderr.contains("looks through every segment"), "{}", miss.show());
    let hit = env.circe(["archive", "search", "--text", "zebrafish", "--in-files"]).run();
    hit.ok();
    assert!(hit.stdout.contains("chat"), "{}", hit.show());
}

/// Every command on an archived task names it in `details.task_id` and says where it lies
/// as facts (`period`, `segment`, `bundle`, in `show`'s words); `archive --json` names its
/// segments as `show` and `search` do (the file's name).
#[test]
fn an_archived_task_is_told_in_one_vocabulary() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    let run = env.circe(["--json", "archive"]).now(LATER).run();
    run.ok();
    let seg = segment(&env);
    assert_eq!(run.json()["segments"], serde_json::json!([seg.clone()]), "{}", run.show());
    let shown = env.circe(["--json", "show", "T1"]).run();
    assert_eq!(shown.json()["segment"], seg.as_str(), "{}", shown.show());
    for args in [
        &["take", "T1"][..],
        &["done", "T1"][..],
        &["status", "T1", "failed"][..],
        &["claim", "T1"][..],
    ] {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let o = env.as_("engineer", &all);
        o.code(3);
        let d = &o.json()["error"]["details"];
        assert_eq!(d["task_id"], "T1", "{args:?}: {}", o.show());
        assert_eq!(d["segment"], seg.as_str(), "{args:?}: {}", o.show());
        assert_eq!(d["period"], "2025-11", "{args:?}: {}", o.show());
        assert_eq!(d["bundle"], shown.json()["bundle"], "{args:?}: {}", o.show());
        assert!(d.get("archived").is_none(), "{args:?}: {}", o.show());
    }
}

/// Doctor names an interrupted run's state as its journal writes it (`staging`).
#[test]
fn doctor_says_an_interrupted_runs_state_as_the_journal_writes_it() {
    local_only!("the archive is kept by the local engine");
    let env = with_work();
    std::fs::create_dir_all(env.root().join("ARCHIVE")).unwrap();
    std::fs::write(env.root().join("ARCHIVE/journal.json"), br#"{"v":1,"run":"R","state":"staging","pid":4242,"host":"elsewhere","started_at":"2031-01-01T00:00:00Z","staging":"archive-4242-R"}"#).unwrap();
    let o = env.circe(["doctor"]).run();
    o.code(1);
    assert!(o.stderr.contains("(R, state staging)"), "{}", o.show());
}
