//! An owner paused past its lease (SIGSTOP) and hosts with wrong clocks: the lease and the
//! epoch decide, by the server's clock. A stale owner's writes exit 4 and change nothing;
//! a host whose clock runs ahead cannot take a task early, nor one whose clock runs
//! behind stretch a lease.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::common::{Root, nap};

fn record(root: &Root, task: &str) -> circe::task::StatusRecord {
    let id = circe::names::TaskId::new(task).unwrap();
    root.engine().peek(&id).unwrap().expect("the task").rec
}

/// Send SIGSTOP or SIGCONT to a process.
fn signal(pid: u32, sig: &str) {
    std::process::Command::new("kill").args([sig, &pid.to_string()]).status().unwrap();
}

/// The stale owner's four writes, each must exit 4 and leave the task as it was. Returns
/// the exit codes seen (for the broken variant).
fn stale_writes(root: &Root, task: &str, epoch: &str) -> Vec<(String, i32, bool)> {
    let mut seen = Vec::new();
    for args in [
        vec!["status", task, "in_progress", "--epoch", epoch],
        vec!["heartbeat", task, "--epoch", epoch],
        vec!["check", task, "tests_passed=true", "--epoch", epoch],
        vec!["release", task, "--epoch", epoch],
    ] {
        let before = root.engine().peek(&circe::names::TaskId::new(task).unwrap()).unwrap();
        let out = root.run(Some("e1"), &args);
        let after = root.engine().peek(&circe::names::TaskId::new(task).unwrap()).unwrap();
        let unchanged = format!("{before:?}") == format!("{after:?}");
        seen.push((args[0].to_string(), out.code, unchanged));
    }
    seen
}

/// e1 holds T-000 with a 2 s lease while `check --run` is paused past it; e2 takes over.
fn paused_owner(root: &Root) -> (i32, Vec<(String, i32, bool)>) {
    root.open_tasks(1);
    let g = root.run(Some("e1"), &["claim", "T-000", "--ttl", "2s", "--json"]);
    g.ok();
    let epoch = g.json()["epoch"].as_u64().unwrap().to_string();
    // A long check: the process is stopped while its command runs (no transaction open).
    let child = root
        .command(
            Some("e1"),
            &["check", "T-000", "--run", "tests_passed", "--epoch", &epoch, "--", "sleep", "1"],
        )
        .spawn()
        .unwrap();
    nap(300);
    signal(child.id(), "-STOP");
    std::thread::sleep(Duration::from_secs(3)); // past the lease, by the server's clock
    root.run(Some("e2"), &["claim", "T-000"]).ok();
    signal(child.id(), "-CONT");
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), stale_writes(root, "T-000", &epoch))
}

#[test]
fn a_paused_owner_is_fenced_out_after_a_takeover() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 2);
    let (check, writes) = paused_owner(&root);
    assert_eq!(check, 4, "the paused check --run must not record its result");
    assert_eq!(record(&root, "T-000").owner.unwrap().as_str(), "e2");
    for (what, code, unchanged) in &writes {
        assert_eq!(*code, 4, "the stale owner's {what} must exit 4");
        assert!(unchanged, "the stale owner's {what} changed the task");
    }
}

/// The checker fails when fencing is switched off.
#[test]
fn the_fencing_checker_sees_a_stale_write_without_fencing() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 2);
    root.env.push(("CIRCE_TEST_BREAK".into(), "no-fence".into()));
    let (_, writes) = paused_owner(&root);
    assert!(
        writes.iter().any(|(_, code, unchanged)| *code != 4 || !unchanged),
        "every stale write was refused although fencing was off: {writes:?}"
    );
}

fn shifted(hours: i64) -> String {
    let t: DateTime<Utc> = Utc::now() + chrono::Duration::hours(hours);
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// e1 claims with a 60 s lease; a host 2 h ahead tries to take over, a host 2 h behind
/// heartbeats. Returns (the early claim's exit code, the lease after the heartbeat).
fn skewed(root: &Root) -> (i32, DateTime<Utc>, Instant) {
    root.open_tasks(1);
    root.run(Some("e1"), &["claim", "T-000", "--ttl", "60s"]).ok();
    let mut ahead = root.command(Some("e2"), &["claim", "T-000"]);
    ahead.env("CIRCE_NOW", shifted(2));
    let early = crate::common::Out::from(&ahead.output().unwrap());
    let mut behind = root.command(Some("e1"), &["heartbeat", "T-000", "--ttl", "60s"]);
    behind.env("CIRCE_NOW", shifted(-2));
    let _ = behind.output().unwrap();
    let mut ahead_beat = root.command(Some("e1"), &["heartbeat", "T-000", "--ttl", "60s"]);
    ahead_beat.env("CIRCE_NOW", shifted(2));
    let _ = ahead_beat.output().unwrap();
    let lease = record(root, "T-000").lease_expires_at.unwrap();
    (early.code, circe::clock::parse(&lease).unwrap(), Instant::now())
}

#[test]
fn a_host_with_a_wrong_clock_can_neither_take_early_nor_stretch_a_lease() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 2);
    let (early, lease, _) = skewed(&root);
    assert_eq!(early, 4, "a host 2 h ahead took the task before its lease ran out");
    let now = Utc::now();
    let d = (lease - now).num_seconds();
    assert!((50..=70).contains(&d), "the lease ends {d} s from now: not the server's now + 60 s");
}

/// The checker fails when leases follow the client's clock.
#[test]
fn the_clock_checker_sees_an_early_takeover_with_client_time() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 2);
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-client-clock".into()));
    let (early, lease, _) = skewed(&root);
    let d = (lease - Utc::now()).num_seconds();
    assert!(
        early == 0 || !(50..=70).contains(&d),
        "the broken variant passed: exit {early}, lease in {d} s"
    );
}

/// What a host 2 h ahead is told about T-000, held by e1 with a 60 s lease: the LEASE cell of
/// `tasks` and how many tasks `inbox` says e2 may take over.
fn seen_from_ahead(root: &Root) -> (String, u64) {
    root.open_tasks(1);
    root.run(Some("e1"), &["claim", "T-000", "--ttl", "60s"]).ok();
    let mut tasks = root.command(Some("e2"), &["tasks"]);
    tasks.env("CIRCE_NOW", shifted(2));
    let tasks = crate::common::Out::from(&tasks.output().unwrap());
    tasks.ok();
    let line = tasks.stdout.lines().find(|l| l.starts_with("T-000")).unwrap_or_default();
    let lease = line.split_whitespace().nth(5).unwrap_or_default().to_string();
    let mut inbox = root.command(Some("e2"), &["inbox", "--json"]);
    inbox.env("CIRCE_NOW", shifted(2));
    let inbox = crate::common::Out::from(&inbox.output().unwrap());
    inbox.ok();
    (lease, inbox.json()["claimable"]["lapsed"].as_u64().unwrap_or(99))
}

#[test]
fn a_host_with_a_wrong_clock_is_shown_leases_by_the_server_clock() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 2);
    let (lease, lapsed) = seen_from_ahead(&root);
    let about_a_minute = lease == "1m" || lease.ends_with('s') && lease != "expired";
    assert!(about_a_minute, "LEASE {lease:?}: not about 60 s left");
    assert_eq!(lapsed, 0, "inbox offers a takeover the server's clock refuses");
}

/// The checker fails when reports read this host's clock.
#[test]
fn the_report_clock_checker_sees_host_time() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 2);
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-client-clock".into()));
    let (lease, lapsed) = seen_from_ahead(&root);
    assert!(lease == "expired" && lapsed == 1, "the broken variant passed: {lease:?}, {lapsed}");
}

/// An ask and an inbox message due in an hour, reaped by a host 2 h ahead; then an ask due
/// in 2 s answered, after it, by a host 2 h behind. Returns (open asks after the reap, the
/// messages left in qa's INBOX, the late answer's exit code).
fn deadlines_from_skewed_hosts(root: &Root) -> (usize, usize, i32) {
    let ask = ["send", "--to", "agent:qa", "--intent", "ask", "--summary", "ready?"];
    root.run(Some("coordinator"), &[&ask[..], &["--deadline", "1h"]].concat()).ok();
    let inform = ["send", "--to", "agent:qa", "--intent", "inform", "--summary", "fyi"];
    root.run(Some("coordinator"), &[&inform[..], &["--deadline", "1h"]].concat()).ok();
    let mut reap = root.command(Some("coordinator"), &["reap"]);
    reap.env("CIRCE_NOW", shifted(2));
    crate::common::Out::from(&reap.output().unwrap()).ok();
    let open = root.run(Some("coordinator"), &["asks", "--json"]).json()["asks"]
        .as_array()
        .map_or(0, Vec::len);
    let inbox = root.run(Some("qa"), &["inbox", "--json"]).json()["messages"]
        .as_array()
        .map_or(0, Vec::len);
    let late = root.run(Some("coordinator"), &[&ask[..], &["--deadline", "2s", "--json"]].concat());
    let id = late.json()["msg_id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_secs(3)); // past its deadline, by the server's clock
    let mut answer = root.command(
        Some("qa"),
        &["send", "--intent", "ask-response", "--in-reply-to", &id, "--summary", "yes"],
    );
    answer.env("CIRCE_NOW", shifted(-2));
    (open, inbox, answer.output().unwrap().status.code().unwrap_or(-1))
}

#[test]
fn ask_and_message_deadlines_are_the_servers_too() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 0);
    let (open, inbox, late) = deadlines_from_skewed_hosts(&root);
    assert_eq!(open, 1, "a host 2 h ahead expired an ask with an hour left");
    assert_eq!(inbox, 2, "a host 2 h ahead filed unread messages with an hour left");
    assert_eq!(late, 3, "a host 2 h behind answered an ask past its deadline");
}

/// A deadline given as a duration is counted from the clock that judges it: a host 2 h
/// behind may send `--deadline 1h`, and the deadline lies an hour after the server's now.
#[test]
fn a_relative_deadline_counts_from_the_servers_clock() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 0);
    let mut send = root.command(
        Some("coordinator"),
        &[
            "send",
            "--to",
            "agent:qa",
            "--intent",
            "inform",
            "--summary",
            "s",
            "--deadline",
            "1h",
            "--json",
        ],
    );
    send.env("CIRCE_NOW", shifted(-2));
    let out = crate::common::Out::from(&send.output().unwrap());
    out.ok();
    let id = out.json()["msg_id"].as_str().unwrap().to_string();
    let shown = root.run(None, &["show", &id, "--json"]);
    let due = shown.json()["message"]["deadline"].as_str().unwrap_or_default().to_string();
    let d = (circe::clock::parse(&due).unwrap() - Utc::now()).num_minutes();
    assert!((55..=65).contains(&d), "the deadline is {d} min from now: {}", shown.stdout);
}

/// The checker fails when deadlines follow the client's clock.
#[test]
fn the_deadline_clock_checker_sees_client_time() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 0);
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-client-clock".into()));
    let (open, inbox, late) = deadlines_from_skewed_hosts(&root);
    assert!(open != 1 || inbox != 2 || late != 3, "the broken variant passed");
}

/// A message sent and a question filed unanswered by a host 2 h ahead: returns how far
/// from this host's clock each event the two logged is stamped, in minutes.
fn events_from_a_host_ahead(root: &Root) -> Vec<i64> {
    let inform = ["send", "--to", "agent:qa", "--intent", "inform", "--summary", "fyi"];
    let mut send = root.command(Some("coordinator"), &inform);
    send.env("CIRCE_NOW", shifted(2));
    crate::common::Out::from(&send.output().unwrap()).ok();
    let ask = ["send", "--to", "agent:qa", "--intent", "ask", "--summary", "ready?"];
    root.run(Some("coordinator"), &[&ask[..], &["--deadline", "1s"]].concat()).ok();
    std::thread::sleep(Duration::from_secs(2)); // past its deadline, by the server's clock
    let mut reap = root.command(Some("coordinator"), &["reap"]);
    reap.env("CIRCE_NOW", shifted(2));
    crate::common::Out::from(&reap.output().unwrap()).ok();
    let log = root.run(None, &["log", "--json", "--limit", "100"]);
    log.ok();
    let kinds = ["send", "lapse"];
    let mut off = Vec::new();
    for line in log.stdout.lines() {
        let ev: serde_json::Value = serde_json::from_str(line).unwrap();
        let by_ahead =
            ev["agent"] == "circe" || ev["msg_id"].is_string() && ev["intent"] == "inform";
        if kinds.contains(&ev["event"].as_str().unwrap_or_default()) && by_ahead {
            let ts = circe::clock::parse(ev["ts"].as_str().unwrap()).unwrap();
            off.push((ts - Utc::now()).num_minutes());
        }
    }
    off
}

#[test]
fn events_a_host_with_a_wrong_clock_logs_carry_the_servers_time() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 0);
    let off = events_from_a_host_ahead(&root);
    assert!(off.len() >= 2, "the send and the lapse were not logged: {off:?}");
    assert!(off.iter().all(|m| m.abs() <= 1), "minutes from the server's clock: {off:?}");
}

/// The checker fails when the events carry the client's time.
#[test]
fn the_event_clock_checker_sees_client_time() {
    let c = need_pg!();
    let mut root = Root::new(&c.fresh_url(), "server", 0);
    root.env.push(("CIRCE_TEST_BREAK".into(), "pg-client-clock".into()));
    let off = events_from_a_host_ahead(&root);
    assert!(off.iter().any(|m| *m > 100), "the broken variant passed: {off:?}");
}
