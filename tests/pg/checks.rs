//! A check result written into a task's row by hand does not complete the task: completion
//! reads what the event log last said of each check (`ops::proof`), on this engine as on a
//! folder.

use crate::common::Root;

/// A fresh root with task T-000 claimed by e1 and in progress: its schema and the root.
fn in_progress(c: &crate::pg_cluster::Cluster) -> (String, Root) {
    let url = c.fresh_url();
    let schema = url.rsplit_once("schema=").map(|(_, s)| s.to_string()).unwrap();
    let root = Root::new(&url, "server", 1);
    root.open_tasks(1);
    root.run(Some("e1"), &["claim", "T-000"]).ok();
    root.run(Some("e1"), &["status", "T-000", "in_progress"]).ok();
    (schema, root)
}

#[test]
fn a_check_passed_by_editing_the_row_does_not_complete_the_task() {
    let c = need_pg!();
    let (schema, root) = in_progress(c);
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

/// A line of the event log that does not parse (written by hand: circe writes whole lines)
/// is passed over by every reader, as the local engine passes over a torn one: the task's
/// completion, which reads its events back, and `log --task` go on past it.
#[test]
fn a_line_of_the_log_that_does_not_parse_is_passed_over() {
    let c = need_pg!();
    let (schema, root) = in_progress(c);
    root.run(Some("e1"), &["check", "T-000", "--run", "tests_passed", "--", "true"]).ok();
    // The claim's line, cut short: it still names the task, so the task's reads find it.
    c.psql(&format!(
        "UPDATE \"{schema}\".events SET line = left(line, -1) \
          WHERE id = (SELECT max(id) FROM \"{schema}\".events WHERE line LIKE '%\"event\":\"claim\"%')"
    ));
    let log = root.run(Some("e1"), &["--json", "log", "--task", "T-000"]);
    assert_eq!(log.code, 0, "{log:?}");
    assert!(!log.stdout.contains("\"event\":\"claim\""), "the cut line was shown: {log:?}");
    // It takes no event's place in a page (`log` reads 512 at a time): 600 more lines
    // naming the task, one of the newest cut short, and the log still gives every other
    // (not a short page read as the log's start).
    let s = format!("\"{schema}\"");
    c.psql(&format!(
        "SELECT {s}.append_events('T-000', array(SELECT e.line FROM {s}.events e, generate_series(1, 600) \
           WHERE e.id = (SELECT max(id) FROM {s}.events WHERE line LIKE '%\"event\":\"check\"%')), NULL); \
         UPDATE {s}.events SET line = left(line, -1) WHERE id = (SELECT max(id) - 10 FROM {s}.events)"
    ));
    let whole: usize = c
        .psql(&format!("SELECT count(*) FROM {s}.events WHERE right(line, 1) = '}}' AND strpos(line, '\"T-000\"') > 0"))
        .trim()
        .parse()
        .unwrap();
    let log = root.run(Some("e1"), &["--json", "log", "--task", "T-000", "--limit", "5000"]);
    assert_eq!(log.stdout.lines().count(), whole, "{}", log.stderr);
    let done = root.run(Some("e1"), &["status", "T-000", "completed"]);
    assert_eq!(done.code, 0, "{done:?}");
    // Doctor names it, for a person (nothing for `--repair` to mend).
    let doctor = root.run(None, &["doctor"]);
    assert_eq!(doctor.code, 1, "{doctor:?}");
    assert!(doctor.stderr.contains("is no whole line as circe writes it"), "{doctor:?}");
}
