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
