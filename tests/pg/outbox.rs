//! A task change's outbox commits with the task: a `task-complete` killed between the
//! task's statement and its messages' leaves either both (the task completed, the message
//! with the requester) or neither (the task as it was, nothing delivered), and a retry
//! finishes it once. Shown failing when the outbox is delivered after the task's commit
//! (`pg-outbox-apart`): the crash then leaves a completed task whose message never came.

use std::io::Write;
use std::process::Stdio;

use circe::boxes::Mailbox;
use circe::names::{AgentName, TaskId};
use circe::task::Status;

use crate::common::{Out, Root};

const DONE: &str = "---\nto: coordinator\ntype: task-complete\nstatus: complete\nmsg-id: done-1\nin-reply-to: task-1\n---\n\ndone\n";

/// `circe --agent e1 send --file -` with `DONE`, with extra environment.
fn complete(root: &Root, env: &[(&str, &str)]) -> Out {
    let mut c = root.command(Some("e1"), &["send", "--file", "-"]);
    c.stdin(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("spawn circe");
    child.stdin.take().expect("stdin").write_all(DONE.as_bytes()).expect("write stdin");
    Out::from(&child.wait_with_output().expect("wait"))
}

/// (is task-1 completed, how many copies of its task-complete reached the requester).
fn outcome(root: &Root) -> (bool, usize) {
    let eng = root.engine();
    let st = eng.peek(&TaskId::new("task-1").unwrap()).unwrap().expect("task-1");
    let inbox = Mailbox::Inbox(AgentName::new("coordinator").unwrap());
    let copies = eng.find_msg_id("done-1").unwrap().into_iter().filter(|(b, _)| *b == inbox);
    (st.rec.status == Status::Completed, copies.count())
}

/// Kill a task-complete at `pg-task-outbox` (with `brk` broken), check what is left, retry.
fn crash_then_retry(brk: Option<&str>) {
    let Some(c) = crate::common::cluster() else {
        panic!("a task and its messages parted (skipped: no PostgreSQL)")
    };
    let root = Root::new(&c.fresh_url(), "client", 1);
    let task = "---\nto: e1\ntype: task\nmsg-id: task-1\n---\n\nreview\n";
    let mut c = root.command(Some("coordinator"), &["send", "--file", "-"]);
    c.stdin(Stdio::piped());
    let mut child = c.spawn().expect("spawn circe");
    child.stdin.take().unwrap().write_all(task.as_bytes()).unwrap();
    Out::from(&child.wait_with_output().unwrap()).ok();
    root.run(Some("e1"), &["claim", "task-1"]).ok();
    root.run(Some("e1"), &["status", "task-1", "in_progress"]).ok();
    let mut env = vec![("CIRCE_CRASH_AT", "pg-task-outbox")];
    if let Some(b) = brk {
        env.push(("CIRCE_TEST_BREAK", b));
    }
    let crashed = complete(&root, &env);
    assert_eq!(crashed.code, circe::fault::CRASH_EXIT, "{crashed:?}");
    let (done, copies) = outcome(&root);
    assert!(
        done == (copies == 1) && copies <= 1,
        "a task and its messages parted: {done} {copies}"
    );
    complete(&root, &[]).ok();
    assert_eq!(outcome(&root), (true, 1), "the retry completes it once");
}

#[test]
fn a_task_complete_and_its_message_commit_together() {
    if crate::common::cluster().is_none() {
        return;
    }
    crash_then_retry(None);
}

/// The checker sees the parting when the outbox is delivered after the task's commit.
#[test]
#[should_panic(expected = "a task and its messages parted")]
fn the_outbox_checker_sees_an_outbox_apart_from_its_task() {
    crash_then_retry(Some("pg-outbox-apart"));
}

/// A local root whose task record still holds an outbox (a `task-complete` killed after its
/// record, before its message was cleared from it) is not migrated: `migrate` refuses a root
/// with violations, and doctor names the task. After `doctor --repair` it migrates, and the
/// message is there once.
#[test]
fn a_record_holding_an_outbox_is_repaired_before_it_migrates() {
    let c = need_pg!();
    let project = tempfile::tempdir().unwrap();
    let run = |agent: Option<&str>, args: &[&str], stdin: Option<&str>, crash: Option<&str>| {
        let mut cmd = std::process::Command::new(crate::common::BIN);
        cmd.args(args).current_dir(project.path()).env_clear().stdin(Stdio::piped());
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if let Some(a) = agent {
            cmd.env("CIRCE_AGENT", a);
        }
        if let Some(p) = crash {
            cmd.env("CIRCE_CRASH_AT", p);
        }
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
        Out::from(&child.wait_with_output().unwrap())
    };
    run(None, &["init"], None, None).ok();
    run(None, &["agent", "add", "e1", "--role", "engineer"], None, None).ok();
    let task = "---\nto: e1\ntype: task\nmsg-id: task-1\n---\n\nreview\n";
    run(Some("coordinator"), &["send", "--file", "-"], Some(task), None).ok();
    run(Some("e1"), &["claim", "task-1"], None, None).ok();
    run(Some("e1"), &["status", "task-1", "in_progress"], None, None).ok();
    let crashed = run(Some("e1"), &["send", "--file", "-"], Some(DONE), Some("outbox.delivered"));
    assert_eq!(crashed.code, circe::fault::CRASH_EXIT, "{crashed:?}");
    let url = c.fresh_url();
    let refused = run(None, &["migrate", "--to", &url, "--clock", "client"], None, None);
    assert_eq!(refused.code, 3, "{refused:?}");
    assert!(refused.stderr.contains("doctor --repair"), "{refused:?}");
    let found = run(None, &["doctor"], None, None);
    assert!(found.stderr.contains("task task-1: 1 message(s)"), "{found:?}");
    run(None, &["doctor", "--repair"], None, None);
    run(None, &["doctor"], None, None).ok();
    run(None, &["migrate", "--to", &url, "--clock", "client"], None, None).ok();
    assert_eq!(outcome(&Root::at(&url)), (true, 1), "completed, its message there once");
}
