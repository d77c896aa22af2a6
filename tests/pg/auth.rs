//! Connecting: the password comes from `PGPASSWORD` or the password file (never the URL),
//! and a connection that fails says why (the reason the client library keeps apart) with a
//! hint that leads somewhere: the password file when the server asks for a password nobody
//! gave, the password when the server refuses it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::Root;

/// A role of its own that must give a password over the socket (a line put first in the
/// shared cluster's `pg_hba.conf`; every other role keeps `trust`).
fn password_role(c: &crate::pg_cluster::Cluster, role: &str, password: &str) {
    c.psql(&format!("CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{password}'"));
    let hba = c.dir.join("data").join("pg_hba.conf");
    let text = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
    std::fs::write(&hba, format!("local all {role} scram-sha-256\n{text}")).expect("write it");
    c.psql("SELECT pg_reload_conf()");
    // The postmaster reads the file on the signal; a new connection then sees it.
    for _ in 0..50 {
        if c.psql(&format!(
            "SELECT count(*) FROM pg_hba_file_rules WHERE '{role}' = ANY(user_name)"
        ))
        .trim()
            == "1"
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
}

fn passfile(dir: &Path, line: &str) -> String {
    let p = dir.join("pgpass");
    std::fs::write(&p, format!("# circe test\n{line}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p.display().to_string()
}

#[test]
fn the_password_comes_from_the_environment_or_the_password_file_and_its_absence_is_explained() {
    let c = need_pg!();
    let role = format!("pw_{}", std::process::id());
    password_role(c, &role, "s3cret:x");
    let url = c.fresh_url().replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    let tmp = tempfile::tempdir().unwrap();

    // No password anywhere (no HOME, no PGPASSFILE, no PGPASSWORD): say so, point to the file.
    let none = Root::at(&url).run(None, &["init"]);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains(&format!("asks a password of user {role}")), "{none:?}");
    assert!(none.stderr.contains(".pgpass") && none.stderr.contains("PGPASSWORD"), "{none:?}");

    // A wrong one: the server's refusal, and what to check.
    let mut wrong = Root::at(&url);
    wrong.env.push(("PGPASSWORD".into(), "nope".into()));
    let o = wrong.run(None, &["init"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.stderr.contains("password authentication failed"), "{o:?}");
    assert!(o.stderr.contains("hint: check the user and the password"), "{o:?}");

    // The password file (a socket folder is `localhost`; `\:` escapes a colon).
    let mut filed = Root::at(&url);
    let line = format!("localhost:{}:postgres:{role}:s3cret\\:x", c.port);
    filed.env.push(("PGPASSFILE".into(), passfile(tmp.path(), &line)));
    filed.run(None, &["init"]).ok();
    filed.run(None, &["tasks"]).ok();
    // As libpq: a password file others may read is not used, and says so.
    let open = std::fs::Permissions::from_mode(0o644);
    std::fs::set_permissions(tmp.path().join("pgpass"), open).unwrap();
    let o = filed.run(None, &["tasks"]);
    assert!(o.code == 1 && o.stderr.contains("has group or world access"), "{o:?}");
    // A line for another port gives nothing.
    let mut other = Root::at(&url);
    let line = format!("localhost:{}:postgres:{role}:s3cret\\:x", c.port + 1);
    other.env.push(("PGPASSFILE".into(), passfile(tmp.path(), &line)));
    let o = other.run(None, &["tasks"]);
    assert!(o.code == 1 && o.stderr.contains("asks a password of user"), "{o:?}");
    assert!(o.stderr.contains("pgpass matches"), "{o:?}");
    // A password file that is not there is said so.
    let mut missing = Root::at(&url);
    let gone = tmp.path().join("gone");
    missing.env.push(("PGPASSFILE".into(), gone.display().to_string()));
    let o = missing.run(None, &["tasks"]);
    assert!(
        o.code == 1 && o.stderr.contains(&format!("{} does not exist", gone.display())),
        "{o:?}"
    );
    // `*` matches any port, and PGPASSWORD comes before the file.
    let mut star = Root::at(&url);
    star.env.push(("PGPASSFILE".into(), passfile(tmp.path(), &format!("*:*:*:{role}:s3cret\\:x"))));
    star.run(None, &["tasks"]).ok();
    star.env.push(("PGPASSWORD".into(), "nope".into()));
    assert_eq!(star.run(None, &["tasks"]).code, 1);
}

#[test]
fn a_server_that_is_not_there_is_reported_with_the_reason() {
    let c = need_pg!();
    let url = c.fresh_url().replace(&format!("port={}", c.port), &format!("port={}", c.port + 7));
    let o = Root::at(&url).run(None, &["tasks"]);
    assert_eq!(o.code, 1, "{o:?}");
    // The socket file of that port does not exist: the OS's reason is in the message.
    assert!(o.stderr.contains("No such file or directory"), "{o:?}");
    let file = format!("(socket {}/.s.PGSQL.{})", c.socket.display(), c.port + 7);
    assert!(o.stderr.contains(&file), "{o:?}");
    assert!(o.stderr.contains("hint: check the URL, the network"), "{o:?}");
}

/// A connection the server ends (stopped, restarting, or an administrator's terminate)
/// is said as such: here a `wait` whose connections are terminated says so, connects
/// again, and answers when what it waits for happens.
#[test]
fn a_connection_the_server_ends_says_what_to_do() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(1);
    let app = format!("circe_ended_{}", std::process::id());
    let named = crate::common::Root::at(&format!("{url}&application_name={app}"));
    let args = ["wait", "--for", "status:T-000=completed", "--timeout", "20s"];
    let mut cmd = named.command(Some("e1"), &args);
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let sql = format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '{app}'"
    );
    while c.psql(&sql).trim() == "0" && std::time::Instant::now() < until {
        crate::common::nap(50);
    }
    crate::common::nap(1000);
    for args in [
        &["claim", "T-000"][..],
        &["status", "T-000", "in_progress"],
        &["check", "T-000", "tests_passed=true"],
        &["status", "T-000", "completed"],
    ] {
        root.run(Some("e1"), args).ok();
    }
    let out = crate::common::Out::from(&child.wait_with_output().unwrap());
    assert_eq!(out.code, 0, "{out:?}");
    // Which connection sees it first, and when, varies: the server's word (while reading
    // or between statements), or the connection lost.
    let told = out.stderr.contains("terminating connection due to administrator command")
        || out.stderr.contains("stopped or is restarting")
        || out.stderr.contains("lost the connection");
    assert!(told && out.stderr.contains("connected again"), "{out:?}");
}

/// A role that may not run the flush after a task's commit (`pg_logical_emit_message`,
/// revoked from everyone on a cluster of the test's own): the change is made but not
/// answered as done; the command exits 1 with the outcome unknown, naming what the server
/// refused and the grant that mends it. Once granted, the task is there to claim.
#[test]
fn a_role_that_may_not_flush_is_told_the_grant_that_mends_it() {
    // The server's own log writer waits 10 s between flushes: a reader right after the
    // send finds its events not on disk yet, and flushes.
    let c = match crate::pg_cluster::start_with(&["wal_writer_delay=10000"]) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let flush = "pg_logical_emit_message(boolean, text, text)";
    c.psql(&format!(
        "CREATE ROLE noflush LOGIN; GRANT CREATE ON DATABASE postgres TO noflush; \
         REVOKE EXECUTE ON FUNCTION {flush} FROM PUBLIC"
    ));
    let url = format!("{}&schema=noflush", c.base_url()).replacen(
        "postgres://postgres@",
        "postgres://noflush@",
        1,
    );
    let root = Root::new(&url, "server", 1);
    let args = ["send", "--to", "e1", "--intent", "implement_feature", "--task", "T-1"];
    let o = root.run(Some("coordinator"), &[&args[..], &["--summary", "x", "--json"]].concat());
    assert_eq!(o.code, 1, "{o:?}");
    let e = &o.json()["error"];
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains("refused the flush"), "{o:?}");
    assert!(message.contains("permission denied"), "{o:?}");
    assert!(
        e["hint"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("GRANT EXECUTE ON FUNCTION {flush}")),
        "{o:?}"
    );
    assert_eq!(e["details"]["outcome"], "unknown", "{o:?}");
    let grant = format!("GRANT EXECUTE ON FUNCTION {flush}");
    // A reader that must flush before it answers is told the same grant.
    let read = root.run(None, &["log", "--json"]);
    assert_eq!(read.code, 1, "{read:?}");
    assert!(read.stderr.contains(&grant), "{read:?}");
    // A claim made and not flushed says the task it got and the request id that brings it
    // back (a plain retry would take another).
    root.run(Some("coordinator"), &[&args[..5], &["--task", "T-2", "--summary", "y"]].concat());
    let claim = root.run(Some("e1"), &["claim", "--next"]);
    assert_eq!(claim.code, 1, "{claim:?}");
    let request = claim
        .stderr
        .split("--request-id ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no request id said: {claim:?}"))
        .to_string();
    assert!(claim.stderr.contains("this claim got task T-1"), "{claim:?}");
    // doctor says it before any command meets it, with the same grant.
    let flush_line = |d: &crate::common::Out| {
        d.json()["violations"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .filter(|v| v["invariant"] == 10)
            .map(|v| v["what"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    };
    let d = root.run(None, &["doctor", "--json"]);
    let said = flush_line(&d);
    assert_eq!(said.len(), 1, "{d:?}");
    assert!(said[0].contains(&format!("GRANT EXECUTE ON FUNCTION {flush} TO noflush")), "{said:?}");
    c.psql(&format!("GRANT EXECUTE ON FUNCTION {flush} TO noflush"));
    assert!(flush_line(&root.run(None, &["doctor", "--json"])).is_empty());
    let again = root.run(Some("e1"), &["claim", "--next", "--request-id", &request, "--json"]);
    again.ok();
    assert_eq!(again.json()["task_id"], "T-1", "{again:?}");
    root.run(Some("e1"), &["claim", "T-2"]).ok();
}

/// A task change whose session the server ends while it waits for the task's row (a fast
/// shutdown, or an administrator's terminate: SQLSTATE 57P01) changed nothing, and says
/// so as a broken connection does: `committed: false`, no unknown outcome, run it again.
#[test]
fn a_change_whose_session_the_server_ends_before_its_commit_says_nothing_was_committed() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = crate::common::Root::new(&url, "server", 1);
    root.open_tasks(1);
    // Another session holds the task's row.
    let hold = format!(
        "BEGIN; SELECT 1 FROM \"{schema}\".tasks WHERE task_id = 'T-000' FOR UPDATE; SELECT pg_sleep(30);"
    );
    let app = format!("circe_waits_{}", std::process::id());
    let (mut holder, holder_pid) = c.psql_holding(&hold, &format!("holder_{app}"));
    let named = crate::common::Root::at(&format!("{url}&application_name={app}"));
    let mut cmd = named.command(Some("e1"), &["claim", "T-000", "--json"]);
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    // Once the claim waits for the row, end its session.
    let sql = format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
          WHERE application_name = '{app}' AND wait_event_type = 'Lock'"
    );
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while c.psql(&sql).trim() == "0" && std::time::Instant::now() < until {
        crate::common::nap(50);
    }
    let out = crate::common::Out::from(&child.wait_with_output().unwrap());
    c.psql(&format!("SELECT pg_terminate_backend({holder_pid})"));
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(out.code, 1, "{out:?}");
    let details = &out.json()["error"]["details"];
    assert_eq!(details["committed"], serde_json::json!(false), "{}", out.stdout);
    assert_eq!(details["transient"], serde_json::json!(true), "{}", out.stdout);
    assert!(details.get("outcome").is_none(), "{}", out.stdout);
    let shown = root.run(None, &["show", "T-000", "--json"]);
    assert_eq!(shown.ok().json()["task"]["status"], "new", "{shown:?}");
}
