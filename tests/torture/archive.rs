//! The archive under crashes, kill -9 storms and failing I/O: after every interruption and a
//! rerun, every message, record and event that existed before lies exactly once either in
//! the hot folders or in the archive (by name or id, and checksum), what stays was not
//! moved, and doctor is clean. The archive is read back with `tar --zstd`, not with circe.

#![expect(
    clippy::many_single_char_names,
    clippy::case_sensitive_file_extension_comparisons,
    reason = "short names in checkers; circe writes these extensions in lowercase"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::common::{Out, Rng, Root};

pub const POINTS: [&str; 21] = [
    "archive.locked",
    "archive.filed",
    "archive.rotated",
    "archive.scanned",
    "archive.journal",
    "archive.written",
    "archive.finished",
    "archive.verified",
    "archive.staged",
    "archive.committing",
    "archive.placed",
    "archive.tombstoned",
    "archive.committed",
    "archive.removing",
    "archive.message_removed",
    "archive.record.owner",
    "archive.record.checks",
    "archive.record.status",
    "archive.file_removed",
    "archive.removed",
    "archive.done",
];

const T0: &str = "2030-01-01T00:00:00Z";
pub const LATER: &str = "2030-02-01T00:00:00Z";

fn sha(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

/// A root with finished tasks in every place a finished task's message can be, failed and
/// live tasks, a loose old message and one a live task names (each sent to the agent
/// `engineer` alone: `engineer` is also a role, held by `e1` too). Returns it.
pub fn populated(finished: usize) -> Root {
    let r = Root::new(1);
    let at = [("CIRCE_NOW", T0)];
    let ok = |agent: &str, args: &[&str]| {
        let o = r.run_env(Some(agent), args, &at);
        assert_eq!(o.code, 0, "{args:?}: {o:?}");
    };
    for i in 0..finished {
        let t = format!("D{i}");
        ok("coordinator", &crate::common::open_args(&t));
        ok("engineer", &["claim", &t]);
        ok("engineer", &["status", &t, "in_progress"]);
        match i % 3 {
            0 => ok("engineer", &["take", &t]),
            1 => {}
            _ => {
                ok("engineer", &["check", &t, "tests_passed=true"]);
                ok("engineer", &["status", &t, "completed"]);
                ok("engineer", &["done", &t]);
                continue;
            }
        }
        ok("engineer", &["check", &t, "tests_passed=true"]);
        ok("engineer", &["status", &t, "completed"]);
    }
    ok("coordinator", &crate::common::open_args("F1"));
    ok("engineer", &["claim", "F1"]);
    ok("engineer", &["status", "F1", "in_progress"]);
    ok("engineer", &["status", "F1", "failed"]);
    ok("coordinator", &crate::common::open_args("L1"));
    ok("e1", &["claim", "L1"]);
    ok("coordinator", &crate::common::open_args("L2"));
    ok(
        "coordinator",
        &["send", "--to", "agent:engineer", "--intent", "inform", "--summary", "old note"],
    );
    ok(
        "coordinator",
        &[
            "send",
            "--to",
            "agent:engineer",
            "--intent",
            "inform",
            "--task",
            "L1",
            "--summary",
            "about L1",
        ],
    );
    for n in names(&r.dir.join("AGENTS/engineer/INBOX")) {
        if n.contains("inform") {
            ok("engineer", &["done", &n]);
        }
    }
    r
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Everything that must never be lost or doubled: `msg:<name>`, `rec:<file>`, `ev:<id>`,
/// each with its checksum.
pub type Items = BTreeMap<String, String>;

fn event_lines(text: &str, out: &mut BTreeMap<String, Vec<String>>) {
    for line in text.lines() {
        if let Some(id) = circe::event::line_id(line) {
            out.entry(format!("ev:{id}")).or_default().push(sha(line.as_bytes()));
        }
    }
}

/// What the hot folders hold, each item with every checksum it was found with.
fn hot(r: &Root) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut boxes = vec![r.dir.join("NEW_MESSAGES"), r.dir.join("LOGS")];
    for a in names(&r.dir.join("AGENTS")) {
        boxes.push(r.dir.join("AGENTS").join(&a).join("INBOX"));
        boxes.push(r.dir.join("AGENTS").join(&a).join("WORKSPACE"));
    }
    for b in boxes {
        for n in names(&b).into_iter().filter(|n| n.ends_with(".md")) {
            let bytes = std::fs::read(b.join(&n)).unwrap_or_default();
            out.entry(format!("msg:{n}")).or_default().push(sha(&bytes));
        }
    }
    for n in names(&r.dir.join("TASKS")) {
        let bytes = std::fs::read(r.dir.join("TASKS").join(&n)).unwrap_or_default();
        out.entry(format!("rec:{n}")).or_default().push(sha(&bytes));
    }
    for n in names(&r.dir.join("LOGS"))
        .into_iter()
        .filter(|n| n.starts_with("events") && n.ends_with(".jsonl"))
    {
        event_lines(
            &std::fs::read_to_string(r.dir.join("LOGS").join(&n)).unwrap_or_default(),
            &mut out,
        );
    }
    out
}

/// What the committed archive holds, read with `tar --zstd` (never with circe).
fn archived(r: &Root) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let index = std::fs::read_to_string(r.dir.join("ARCHIVE/index.jsonl")).unwrap_or_default();
    let tmp = tempfile::tempdir().unwrap();
    for line in index.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let seg = r
            .dir
            .join("ARCHIVE")
            .join(v["period"].as_str().unwrap())
            .join(v["segment"].as_str().unwrap());
        let o = Command::new("tar")
            .arg("--zstd")
            .arg("-xf")
            .arg(&seg)
            .arg("-C")
            .arg(tmp.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "tar cannot read {}: {o:?}", seg.display());
    }
    walk(tmp.path(), &mut |rel, bytes| {
        // <stem>/tasks/<T>/TASKS/x, <stem>/tasks/<T>/LOGS/x.md, <stem>/loose/LOGS/x.md, <stem>/log/LOGS/events-...
        let parts: Vec<&str> = rel.split('/').collect();
        match parts.as_slice() {
            [_, "tasks", _, "TASKS", f] => {
                out.entry(format!("rec:{f}")).or_default().push(sha(bytes));
            }
            [_, "tasks", _, "LOGS", f] | [_, "loose", "LOGS", f] => {
                out.entry(format!("msg:{f}")).or_default().push(sha(bytes));
            }
            [_, "log", "LOGS", _] => event_lines(&String::from_utf8_lossy(bytes), &mut out),
            _ => {}
        }
    });
    out
}

fn walk(dir: &Path, f: &mut dyn FnMut(&str, &[u8])) {
    fn go(base: &Path, dir: &Path, f: &mut dyn FnMut(&str, &[u8])) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                go(base, &p, f);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                f(&rel, &std::fs::read(&p).unwrap());
            }
        }
    }
    go(dir, dir, f);
}

pub fn snapshot(r: &Root) -> Items {
    hot(r).into_iter().map(|(k, v)| (k, v[0].clone())).collect()
}

/// Every item of `before` exactly once, hot or archived, with its checksum; the tasks that
/// stay (L*) still hot; no event id twice anywhere.
pub fn problems(r: &Root, before: &Items) -> Vec<String> {
    let (h, a) = (hot(r), archived(r));
    let mut p = Vec::new();
    for (k, sum) in before {
        let found: Vec<&String> = h.get(k).into_iter().chain(a.get(k)).flatten().collect();
        let same = found.iter().filter(|s| **s == sum).count();
        if same == 0 {
            p.push(format!("lost {k} ({} other version(s))", found.len()));
        } else if found.len() > 1 {
            p.push(format!("duplicated {k}: {} copies", found.len()));
        }
        let stays = k.starts_with("rec:L") || k.contains("_L1") || k.contains("_L2");
        if stays && !h.contains_key(k) {
            p.push(format!("{k} belongs to a task that stays but left the hot folders"));
        }
    }
    for k in h.keys().chain(a.keys()).filter(|k| k.starts_with("ev:")) {
        let total = h.get(k).map_or(0, Vec::len) + a.get(k).map_or(0, Vec::len);
        if total > 1 {
            p.push(format!("event {k} is in the log {total} times"));
        }
    }
    p.sort();
    p.dedup();
    p
}

pub fn archive(r: &Root, env: &[(&str, &str)]) -> Out {
    let mut e = vec![("CIRCE_NOW", LATER)];
    e.extend_from_slice(env);
    r.run_env(None, &["archive"], &e)
}

/// Full check after an interruption: rerun, then no loss, no duplicate, doctor clean, and
/// the archived tasks are archived.
pub fn rerun_and_check(r: &Root, before: &Items, ctx: &str) -> Vec<String> {
    let mut p = Vec::new();
    let o = archive(r, &[]);
    if o.code != 0 {
        p.push(format!("{ctx}: the rerun failed: {o:?}"));
    }
    p.extend(problems(r, before).into_iter().map(|x| format!("{ctx}: {x}")));
    let (code, v) = r.doctor(false);
    if code != 0 {
        p.push(format!("{ctx}: doctor: {v:?}"));
    }
    for t in ["D0", "D1", "D2", "F1"] {
        if r.status(t).is_some() {
            p.push(format!("{ctx}: {t} was not archived"));
        }
    }
    for t in ["L1", "L2"] {
        if r.status(t).is_none() {
            p.push(format!("{ctx}: {t} is gone"));
        }
    }
    p
}

#[test]
fn every_archive_crash_point_recovers() {
    let t = std::time::Instant::now();
    let mut p = Vec::new();
    let template = populated(3);
    let before = snapshot(&template);
    for (i, point) in POINTS.iter().enumerate() {
        let c = copy_of(&template);
        let r = &c.root;
        let o = archive(r, &[("CIRCE_CRASH_AT", point)]);
        if o.code != 86 {
            p.push(format!("{point}: not reached (exit {}): {}", o.code, o.stderr));
        }
        // Every other point the interrupted run is finished by doctor instead.
        if i % 2 == 1 {
            let (code, v) = r.doctor(true);
            if code != 0 {
                p.push(format!("{point}: doctor --repair: {v:?}"));
            }
        }
        p.extend(rerun_and_check(r, &before, point));
        assert!(t.elapsed().as_secs() < 240, "archive crash slice over its time limit");
    }
    eprintln!("archive crash points: {} runs, {:?}", POINTS.len(), t.elapsed());
    assert!(p.is_empty(), "{} problems: {p:#?}", p.len());
}

/// A run cut off once committed, then the run finishing it cut off while it cleared the
/// staging folder (the journal still says "committing", the staged index is gone): the next
/// run (and doctor --repair) finish it from the archive's own index, nothing lost.
#[test]
fn a_finishing_run_cut_off_while_clearing_its_staging_folder_is_finished() {
    let template = populated(3);
    let before = snapshot(&template);
    for repair_first in [false, true] {
        let c = copy_of(&template);
        let r = &c.root;
        assert_eq!(archive(r, &[("CIRCE_CRASH_AT", "archive.committed")]).code, 86);
        let staging: Vec<_> = std::fs::read_dir(r.dir.join("tmp"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("archive-"))
            .collect();
        assert_eq!(staging.len(), 1, "{staging:?}");
        std::fs::remove_file(staging[0].join("segments.jsonl")).unwrap();
        if repair_first {
            let (code, v) = r.doctor(true);
            assert_eq!(code, 0, "doctor --repair: {v:?}");
        }
        let p = rerun_and_check(r, &before, "cleared staging");
        assert!(p.is_empty(), "{p:#?}");
    }
}

/// Retention cut at its crash point: the index was rewritten, the old segment not yet
/// deleted; the next run (or doctor) removes the unnamed segment, and nothing else changes.
#[test]
fn retention_crash_recovers() {
    let r = populated(3);
    assert_eq!(archive(&r, &[]).code, 0);
    let cfg = r.dir.join("circe.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap() + "archive:\n  keep: 1d\n";
    std::fs::write(&cfg, text).unwrap();
    let much_later = [("CIRCE_NOW", "2030-06-01T00:00:00Z")];
    let mut env = much_later.to_vec();
    env.push(("CIRCE_CRASH_AT", "archive.expired"));
    assert_eq!(r.run_env(None, &["archive"], &env).code, 86);
    let (code, v) = r.doctor(false);
    assert_ne!(code, 0, "doctor must see the unnamed segment: {v:?}");
    let o = r.run_env(None, &["--json", "archive"], &much_later);
    assert_eq!(o.code, 0, "{o:?}");
    let left: Vec<String> = names(&r.dir.join("ARCHIVE/2030-01"))
        .into_iter()
        .filter(|n| n.ends_with(".tar.zst"))
        .collect();
    assert!(left.is_empty(), "expired segments must be gone: {left:?}");
    let summaries = names(&r.dir.join("ARCHIVE/2030-01/summaries"));
    assert!(summaries.is_empty(), "their summaries go with them: {summaries:?}");
    assert!(r.dir.join("ARCHIVE/tombstones/D0").exists(), "tombstones stay");
    let (code, v) = r.doctor(false);
    assert_eq!(code, 0, "{v:?}");
}

/// The checker fails when the next run does not recover (a crash after the commit point
/// leaves originals that the rerun archives a second time).
#[test]
fn archive_checker_catches_no_recovery() {
    let r = populated(3);
    let before = snapshot(&r);
    assert_eq!(archive(&r, &[("CIRCE_CRASH_AT", "archive.committed")]).code, 86);
    let o = archive(&r, &[("CIRCE_TEST_BREAK", "archive-no-recover")]);
    assert_eq!(o.code, 0, "{o:?}");
    let p = problems(&r, &before);
    assert!(p.iter().any(|x| x.starts_with("duplicated")), "the checker saw nothing: {p:?}");
    eprintln!("archive-no-recover caught: {p:?}");
}

/// A fresh copy of `template` (cp -a: faster than making it again).
pub struct Copy {
    _dir: tempfile::TempDir,
    pub root: Root,
}

pub fn copy_of(template: &Root) -> Copy {
    let dir = tempfile::tempdir().unwrap();
    let s = Command::new("cp").arg("-a").arg(&template.dir).arg(dir.path()).status().unwrap();
    assert!(s.success());
    let root = Root::at(dir.path().join(".circe"));
    Copy { _dir: dir, root }
}

/// kill -9 at random times: `n` runs on copies of one populated root.
pub fn storm(n: usize, seed: u64) -> Vec<String> {
    let template = populated(12);
    let before = snapshot(&template);
    let probe = tempfile::tempdir().unwrap();
    let copy = |to: &Path| {
        let s = Command::new("cp").arg("-a").arg(&template.dir).arg(to).status().unwrap();
        assert!(s.success());
    };
    copy(probe.path());
    let start = std::time::Instant::now();
    let o = Root::at(probe.path().join(".circe"))
        .cmd(None, &["archive"], &[("CIRCE_NOW", LATER)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let full = start.elapsed().as_micros().max(1000);
    let mut rng = Rng(seed);
    let mut p = Vec::new();
    let mut killed = 0;
    for i in 0..n {
        let dir = tempfile::tempdir().unwrap();
        copy(dir.path());
        let r = Root::at(dir.path().join(".circe"));
        let mut child = r.cmd(None, &["archive"], &[("CIRCE_NOW", LATER)]).spawn().unwrap();
        let delay = u64::try_from(rng.below(usize::try_from(full).unwrap())).unwrap();
        std::thread::sleep(std::time::Duration::from_micros(delay));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        p.extend(rerun_and_check(&r, &before, &format!("storm {i} (kill after {delay}us)")));
    }
    eprintln!("archive storm: {n} runs, {killed} killed mid-run, full run {full}us");
    p
}

#[test]
fn kill_storm_fast_slice() {
    let p = storm(20, 0x5eed);
    assert!(p.is_empty(), "{} problems: {p:#?}", p.len());
}

#[test]
#[ignore = "long run: cargo test --release --test torture -- --ignored"]
fn kill_storm_200() {
    let p = storm(crate::common::scaled(200), 0xa5c1);
    assert!(p.is_empty(), "{} problems: {p:#?}", p.len());
}

/// ENOSPC and EIO at every store call of a run: a clear error, nothing lost; the rerun
/// finishes.
#[test]
fn failing_io_every_archive_step() {
    let mut p = Vec::new();
    let mut runs = 0;
    let template = populated(3);
    let before = snapshot(&template);
    for errno in ["5", "28"] {
        let mut done = false;
        let mut n = 0;
        // Every call up to the 60th, then every 7th (past the commit point each removal is
        // one more call, and they are all alike).
        while n < 400 {
            n += if n < 60 { 1 } else { 7 };
            let c = copy_of(&template);
            let r = &c.root;
            let ns = n.to_string();
            let o = archive(r, &[("CIRCE_FAIL_IO", &ns), ("CIRCE_FAIL_IO_ERRNO", errno)]);
            runs += 1;
            if o.code == 0 {
                done = true;
                break;
            }
            let ctx = format!("I/O call {n} failing (errno {errno})");
            let want = if errno == "28" { "No space left" } else { "Input/output error" };
            if !o.stderr.starts_with("error: ") || !o.stderr.contains(want) {
                p.push(format!("{ctx}: unclear error (exit {}): {:?}", o.code, o.stderr));
            }
            // Right after the failure: nothing is lost (each item hot or committed).
            p.extend(
                problems(r, &before)
                    .into_iter()
                    .filter(|x| x.starts_with("lost"))
                    .map(|x| format!("{ctx}: {x}")),
            );
            p.extend(rerun_and_check(r, &before, &ctx));
        }
        if !done {
            p.push(format!("errno {errno}: the run never succeeded"));
        }
    }
    eprintln!("archive failing I/O: {runs} runs");
    assert!(p.is_empty(), "{} problems: {p:#?}", p.len());
}

/// Set a folder's modification time an hour back (as if nothing had touched it for that
/// long), so a run may trust its stamp.
fn settle(dir: &Path) {
    let s = Command::new("touch").args(["-m", "-d", "1 hour ago"]).arg(dir).status().unwrap();
    assert!(s.success());
}

/// A message of no task written by hand into LOGS, created at `at`.
fn loose_message(r: &Root, name: &str, at: &str) {
    let text = format!(
        "# MESSAGE\nfrom: coordinator\nto: all\nintent: inform\nstatus: new\ncreated_at: {at}\nmsg_id: {name}\n\n## Summary\nby hand\n"
    );
    std::fs::write(r.dir.join("LOGS").join(name), text).unwrap();
}

fn messages_taken(o: &Out) -> u64 {
    assert_eq!(o.code, 0, "{o:?}");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    v["message_count"].as_u64().unwrap()
}

/// A run with nothing to do remembers what LOGS held (`locks/archive.scan`) and skips
/// reading it while LOGS and TASKS stay as they were; a message that arrives, or one that
/// grows old enough, is still taken by the next run. Returns what was missed (for the
/// broken variant, `archive-trust-hint`, which trusts the hint whatever changed).
fn quiet_hint_misses(broken: &[(&str, &str)]) -> Vec<String> {
    let r = populated(3);
    let json = |now: &str| {
        let mut env = vec![("CIRCE_NOW", now)];
        env.extend_from_slice(broken);
        r.run_env(None, &["--json", "archive"], &env)
    };
    assert_eq!(archive(&r, &[]).code, 0);
    let mut missed = Vec::new();
    // Young at LATER (written a day before it): stays; due a month later.
    loose_message(&r, "young.md", "2030-01-31T00:00:00Z");
    for d in ["LOGS", "TASKS"] {
        settle(&r.dir.join(d));
    }
    assert_eq!(messages_taken(&json(LATER)), 0, "nothing is due yet");
    assert!(r.dir.join("locks/archive.scan").is_file(), "a quiet run remembers");
    assert_eq!(messages_taken(&json(LATER)), 0, "still nothing");
    // Arrives (LOGS changes): taken.
    loose_message(&r, "arrived.md", "2029-12-01T00:00:00Z");
    if messages_taken(&json(LATER)) != 1 {
        missed.push("a message that arrived after the hint".to_string());
    }
    for d in ["LOGS", "TASKS"] {
        settle(&r.dir.join(d));
    }
    assert_eq!(messages_taken(&json(LATER)), 0);
    // Grows old (nothing changes on disk): taken when it is due.
    if messages_taken(&json("2030-03-15T00:00:00Z")) != 1 {
        missed.push("a message that grew old enough".to_string());
    }
    let (code, v) = r.doctor(false);
    assert_eq!(code, 0, "{v:?}");
    missed
}

#[test]
fn a_quiet_run_skips_logs_but_never_misses_what_is_due() {
    let missed = quiet_hint_misses(&[]);
    assert!(missed.is_empty(), "{missed:?}");
}

/// The checker fails on a variant that trusts the hint whatever changed.
#[test]
fn quiet_hint_checker_catches_a_hint_trusted_blindly() {
    let missed = quiet_hint_misses(&[("CIRCE_TEST_BREAK", "archive-trust-hint")]);
    assert!(!missed.is_empty(), "the checker saw nothing");
    eprintln!("archive-trust-hint caught: {missed:?}");
}

/// doctor remembers the listing of a LOGS or TASKS folder that once held many files
/// (`locks/logs.list`, `locks/tasks.list`) while the folder stays as it is; a file planted
/// afterwards is still seen. Returns what was missed (for the broken variant,
/// `listing-trust-cache`, which trusts the listing whatever changed), or `None` where the
/// filesystem does not keep an emptied folder's size.
fn doctor_listing_misses(broken: &[(&str, &str)]) -> Option<Vec<String>> {
    let mut missed = Vec::new();
    for (folder, cache) in [("LOGS", "logs.list"), ("TASKS", "tasks.list")] {
        let r = Root::new(1);
        let dir = r.dir.join(folder);
        // Grown past 1 MiB and emptied, as an archive run leaves it.
        let grown: Vec<_> = (0..25_000)
            .map(|i| dir.join(format!("{i:06}_a_file_held_once_and_archived_since.md")))
            .collect();
        for p in &grown {
            std::fs::File::create(p).unwrap();
        }
        for p in &grown {
            std::fs::remove_file(p).unwrap();
        }
        if std::fs::metadata(&dir).unwrap().len() < 1024 * 1024 {
            eprintln!("skipped: this filesystem shrinks an emptied folder (nothing to remember)");
            return None;
        }
        settle(&dir);
        let doctor = || r.run_env(None, &["doctor"], broken);
        assert_eq!(doctor().code, 0);
        assert!(r.dir.join("locks").join(cache).is_file(), "the listing of {folder} is remembered");
        assert_eq!(doctor().code, 0, "and read back");
        std::fs::write(dir.join("planted.txt"), "not circe's\n").unwrap();
        if doctor().code == 0 {
            missed.push(format!("a file planted in {folder} after its listing was remembered"));
        }
    }
    Some(missed)
}

#[test]
fn doctor_remembers_a_grown_folder_listing_but_sees_what_changes() {
    if let Some(missed) = doctor_listing_misses(&[]) {
        assert!(missed.is_empty(), "{missed:?}");
    }
}

/// The checker fails on a variant that trusts the remembered listing whatever changed.
#[test]
fn doctor_listing_checker_catches_a_listing_trusted_blindly() {
    if let Some(missed) = doctor_listing_misses(&[("CIRCE_TEST_BREAK", "listing-trust-cache")]) {
        assert!(!missed.is_empty(), "the checker saw nothing");
        eprintln!("listing-trust-cache caught: {missed:?}");
    }
}

/// Every event line, in the hot log and in the archive (read with `tar --zstd`).
fn every_event_line(r: &Root) -> Vec<String> {
    let mut lines = Vec::new();
    for n in names(&r.dir.join("LOGS")) {
        if n.starts_with("events") && n.ends_with(".jsonl") {
            let text = std::fs::read_to_string(r.dir.join("LOGS").join(&n)).unwrap_or_default();
            lines.extend(text.lines().map(str::to_string));
        }
    }
    let index = std::fs::read_to_string(r.dir.join("ARCHIVE/index.jsonl")).unwrap_or_default();
    let tmp = tempfile::tempdir().unwrap();
    for line in index.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let seg = r.dir.join("ARCHIVE").join(v["period"].as_str().unwrap());
        let seg = seg.join(v["segment"].as_str().unwrap());
        let mut tar = Command::new("tar");
        tar.arg("--zstd").arg("-xf").arg(&seg).arg("-C").arg(tmp.path());
        assert!(tar.output().unwrap().status.success());
    }
    walk(tmp.path(), &mut |rel, bytes| {
        if rel.split('/').nth(1) == Some("log") {
            lines.extend(String::from_utf8_lossy(bytes).lines().map(str::to_string));
        }
    });
    lines
}

/// A `done` of a finished task's ticket cut off after its move, its events left in the
/// task's lock file after the run settled the journals (`archive-no-settle` stands for a
/// command cut off at that moment): the run logs the `done` before it removes the lock file
/// with the journal in it.
#[test]
fn a_change_cut_off_during_a_run_has_its_event_logged_before_its_task_goes() {
    let r = Root::new(1);
    let at = [("CIRCE_NOW", T0)];
    let eng = |args: &[&str]| r.run_env(Some("engineer"), args, &at);
    assert_eq!(r.run_env(Some("coordinator"), &crate::common::open_args("T1"), &at).code, 0);
    for step in [
        &["claim", "T1"][..],
        &["status", "T1", "in_progress"],
        &["check", "T1", "tests_passed=true"],
        &["status", "T1", "completed"],
    ] {
        assert_eq!(eng(step).code, 0, "{step:?}");
    }
    let cut =
        r.run_env(Some("engineer"), &["done", "T1"], &[at[0], ("CIRCE_CRASH_AT", "done.renamed")]);
    assert_eq!(cut.code, 86, "{cut:?}");
    let o = archive(&r, &[("CIRCE_TEST_BREAK", "archive-no-settle")]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(r.status("T1").is_none(), "archived");
    let done = |l: &String| l.contains("\"event\":\"done\"") && l.contains("\"task_id\":\"T1\"");
    let lines = every_event_line(&r);
    assert_eq!(lines.iter().filter(|l| done(l)).count(), 1, "{lines:#?}");
    assert_eq!(archive(&r, &[]).code, 0);
    assert_eq!(every_event_line(&r).iter().filter(|l| done(l)).count(), 1);
    let (code, v) = r.doctor(false);
    assert_eq!(code, 0, "{v:?}");
}
