//! A check result written into a task's row by hand does not complete the task: completion
//! reads what the event log last said of each check (`ops::proof`), on this engine as on a
//! folder.

use crate::common::Root;

#[test]
fn a_check_passed_by_editing_the_row_does_not_complete_the_task() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit_once("schema=").map(|(_, s)| s.to_string()).unwrap();
    let root = Root::new(&url, "server", 1);
    root.open_tasks(1);
    root.run(Some("e1"), &["claim", "T-000"]).ok();
    root.run(Some("e1"), &["status", "T-000", "in_progress"]).ok();
    let failed = root.run(Some("e1"), &["check", "T-000", "--run", "tests_passed", "--", "false"]);
    assert_eq!(failed.code, 3, "{failed:?}");
    c.psql(&format!(
        "UPDATE \"{schema}\".tasks SET checks = '{{\"tests_passed\": true}}' WHERE task_id = 'T-000'"
    ));
    let done = root.run(Some("e1"), &["--json", "status", "T-000", "completed"]);
    assert_eq!(done.code, 3, "{done:?}");
    let message = done.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("tests_passed: its last check event"), "{message}");
    assert!(message.contains("a run that exited 1"), "{message}");
    let row = c.psql(&format!("SELECT status FROM \"{schema}\".tasks WHERE task_id = 'T-000'"));
    assert_eq!(row.trim(), "in_progress");
    root.run(Some("e1"), &["check", "T-000", "--run", "tests_passed", "--", "true"]).ok();
    root.run(Some("e1"), &["status", "T-000", "completed"]).ok();
}
