//! The database engine keeps no archive: `circe archive` (a run, a dry run, search, verify)
//! is refused with exit 3 and a hint, and changes nothing.

use crate::common::Root;

#[test]
fn archive_is_refused_with_a_hint_and_changes_nothing() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 1);
    root.open_tasks(1);
    let before = root.run(None, &["--json", "tasks"]);
    before.ok();
    for args in [
        &["archive"][..],
        &["archive", "--dry-run"],
        &["archive", "search", "T-000"],
        &["archive", "verify"],
    ] {
        let out = root.run(Some("coordinator"), args);
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("keeps no archive") && out.stderr.contains("hint:"),
            "{args:?}: {}",
            out.stderr
        );
    }
    let after = root.run(None, &["--json", "tasks"]);
    assert_eq!(before.stdout, after.stdout);
}

/// A local root whose newest events are in its archive (its log empty) moves into a
/// database whose feed goes on after the newest id ever given, not after the log's last;
/// doctor finds the feed whole.
/// A folder root (in `project`) whose task A-1 failed and was archived, its log's segments
/// too; returns how to run circe in it (`agent`, `CIRCE_NOW`, args).
fn archived_folder(
    project: &std::path::Path,
) -> impl Fn(Option<&str>, &str, &[&str]) -> crate::common::Out + '_ {
    let run = move |agent: Option<&str>, now: &str, args: &[&str]| {
        let mut cmd = std::process::Command::new(crate::common::BIN);
        cmd.args(args).current_dir(project).env_clear().env("CIRCE_NOW", now);
        if let Some(a) = agent {
            cmd.env("CIRCE_AGENT", a);
        }
        crate::common::Out::from(&cmd.output().unwrap())
    };
    run(None, T0, &["init"]).ok();
    run(Some("coordinator"), T0, &OPEN_A1).ok();
    run(Some("engineer"), T0, &["claim", "A-1"]).ok();
    run(Some("engineer"), T0, &["status", "A-1", "in_progress"]).ok();
    run(Some("engineer"), T0, &["status", "A-1", "failed"]).ok();
    // The first run files the task and rotates the log; the second takes the segments.
    run(None, "2032-01-01T00:00:00Z", &["archive"]).ok();
    run(None, "2033-01-01T00:00:00Z", &["archive"]).ok();
    run
}

const T0: &str = "2025-11-21T17:00:00Z";
const OPEN_A1: [&str; 9] =
    ["send", "--to", "all", "--intent", "implement_feature", "--task", "A-1", "--summary", "x"];

#[test]
fn migrate_goes_on_after_the_newest_event_id_the_archive_holds() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    let run = archived_folder(project.path());
    let (t0, open) = (T0, OPEN_A1);
    let given = run(None, t0, &["--json", "cursors"]).json()["last_event_id"].as_u64().unwrap();
    assert!(given >= 5, "{given}");
    let moved = run(None, t0, &["migrate", "--to", &c.fresh_url()]);
    moved.ok();
    // The archive stays behind; its ids go along: said on the terminal.
    let said = "1 archived task(s) stay in ";
    assert!(
        moved.stdout.contains(said) && moved.stdout.contains("none is opened again"),
        "{}",
        moved.stdout
    );
    run(Some("coordinator"), t0, &["send", "--to", "qa", "--intent", "inform", "--summary", "y"])
        .ok();
    let next = run(None, t0, &["--json", "cursors"]).json()["last_event_id"].as_u64().unwrap();
    assert!(next > given, "an id at or below #{given} was given again in the database: #{next}");
    // The ids the archive took are not in the database, and that is no violation.
    run(None, t0, &["doctor"]).ok();
    // The archived task's id is not opened again, and where to read it is said.
    let again = run(Some("coordinator"), t0, &open);
    assert_eq!(again.code, 3, "{again:?}");
    assert!(again.stderr.contains("task A-1 was archived (failed"), "{}", again.stderr);
    assert!(again.stderr.contains("its archive stayed there"), "{}", again.stderr);
    let shown = run(None, t0, &["show", "A-1"]);
    assert_eq!(shown.code, 3, "{shown:?}");
    // Back into a folder, the id stays kept there.
    let back = project.path().join("back");
    run(None, t0, &["migrate", "--to-local", back.to_str().unwrap()]).ok();
    let stone = std::fs::read_to_string(back.join(".circe/ARCHIVE/tombstones/A-1")).unwrap();
    assert!(stone.contains("\"status\":\"failed\""), "{stone}");
}

/// A mirror watching a schema (made by `init`, empty) while a folder that archived moves
/// into it writes the moved tombstones on its next round, without a restart.
#[test]
fn a_watching_mirror_writes_the_tombstones_of_a_folder_moved_in() {
    let c = need_pg!();
    let url = c.fresh_url();
    let project = tempfile::tempdir().unwrap();
    let run = archived_folder(project.path());
    let root = crate::common::Root::at(&url);
    root.run(None, &["init"]).ok();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("m");
    let mut watch = crate::common::mirror_second_round(&root, &target);
    assert!(!target.join("ARCHIVE/tombstones/A-1").exists());
    run(None, T0, &["migrate", "--to", &url]).ok();
    let status = watch.wait().unwrap();
    assert!(status.success());
    let stone = std::fs::read_to_string(target.join("ARCHIVE/tombstones/A-1"))
        .expect("the second round wrote the moved tombstone");
    assert!(stone.contains("\"status\":\"failed\""), "{stone}");
}
