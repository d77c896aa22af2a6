//! A task change whose check fails inside the commit changes nothing: the record, the
//! message, the feed and the grants stay as they were, and the command exits 4. Both ways
//! a change commits are checked: the plain statement (a connection's first change, as in
//! every CLI run) and `commit_task` (later changes on a connection, as in a library user).

use crate::common::Root;
use crate::pg_cluster::Cluster;

/// The root's schema, from its URL.
fn schema_of(url: &str) -> String {
    url.rsplit_once("schema=").map(|(_, s)| s.to_string()).unwrap()
}

/// What a claim of T-000 may change, as text: the task's row, where the messages lie, the
/// feed's last id and the grants.
fn state(c: &Cluster, schema: &str) -> String {
    c.psql(&format!(
        "SELECT (SELECT to_jsonb(t)::text FROM \"{schema}\".tasks t WHERE task_id = 'T-000'),
                (SELECT string_agg(box || '/' || file, ',' ORDER BY box, file) FROM \"{schema}\".messages),
                (SELECT last FROM \"{schema}\".feed),
                (SELECT count(*) FROM \"{schema}\".grants)"
    ))
}

/// Move the waiting tickets to LOGS by hand, claim T-000 with `claim` (the conflict's
/// message and hint, or `None` when it went through): refused, saying where it looked and
/// what to do, changing nothing. Put back, the same claim goes through (the check is not refusing everything).
fn refused_then_put_back(c: &Cluster, schema: &str, mut claim: impl FnMut() -> Option<String>) {
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'logs' WHERE box = 'new'"));
    let before = state(c, schema);
    let refused = claim().expect("the claim is refused");
    assert!(refused.contains("is not in"), "says where the message was looked for: {refused}");
    assert!(refused.contains("circe doctor"), "says what to do: {refused}");
    assert_eq!(state(c, schema), before, "the refused claim changed nothing");
    c.psql(&format!("UPDATE \"{schema}\".messages SET box = 'new' WHERE box = 'logs'"));
    assert_eq!(claim(), None, "the claim goes through once the message is back");
    assert_ne!(state(c, schema), before, "the claim changed the task");
}

#[test]
fn a_claim_whose_message_was_moved_by_hand_exits_4_and_changes_nothing() {
    let c = need_pg!();
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 1);
    root.open_tasks(1);
    refused_then_put_back(c, &schema_of(&url), || {
        let out = root.run(Some("e1"), &["claim", "T-000", "--json"]);
        match out.code {
            0 => None,
            4 => {
                Some(format!("{} {}", out.json()["error"]["message"], out.json()["error"]["hint"]))
            }
            code => panic!("exit {code}: {} {}", out.stdout, out.stderr),
        }
    });
}

#[test]
fn on_a_warm_connection_too_a_refused_claim_changes_nothing() {
    use circe::engine::RootSpec;
    use circe::names::TaskId;
    let c = need_pg!();
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 1);
    root.open_tasks(2);
    let ws = circe::workspace::Workspace::open(&RootSpec::Url(url.clone())).unwrap();
    let (me, role) = ws.agent(Some("e1")).unwrap();
    // A first change on the connection (by the plain statement): the next goes through
    // `commit_task`.
    circe::ops::claim(&ws, &me, &role, &TaskId::new("T-001").unwrap(), None).unwrap();
    let t0 = TaskId::new("T-000").unwrap();
    refused_then_put_back(c, &schema_of(&url), || {
        match circe::ops::claim(&ws, &me, &role, &t0, None) {
            Ok(_) => None,
            Err(e) if e.kind == circe::error::Kind::Conflict => {
                Some(format!("{} {}", e.chain(), e.hint.unwrap_or_default()))
            }
            Err(e) => panic!("{}", e.chain()),
        }
    });
}

/// A psql session on `conninfo` that reads SQL from the returned stdin (a transaction the
/// test opens and leaves open while something else runs).
fn psql_session(
    psql: &std::path::Path,
    conninfo: &str,
) -> (std::process::Child, std::process::ChildStdin) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(psql)
        .arg(conninfo)
        .args(["-X", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("psql");
    let to = child.stdin.take().unwrap();
    (child, to)
}

/// A library claimer prepares its pick on its connection once it is warm (`prepared.rs`).
/// Behind a transaction pooler the URL does not name (no `listen_port=`), its next
/// transaction can run in a server session that lacks the statement: the claim then sends
/// the statement as text and goes on, and the connection prepares nothing more.
#[test]
fn a_claimer_behind_a_pooler_the_url_does_not_name_goes_on_without_its_prepared_pick() {
    use std::io::Write as _;

    use circe::engine::RootSpec;
    let c = need_pg!();
    let Ok(bouncer) = crate::pg_cluster::Bouncer::start(c, 2) else {
        eprintln!("skipped: pgbouncer is not installed");
        return;
    };
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 1);
    root.open_tasks(4);
    let pooled = bouncer.url(&schema_of(&url));
    let ws = circe::workspace::Workspace::open(&RootSpec::Url(pooled)).unwrap();
    let mut got = Vec::new();
    let claim = |got: &mut Vec<String>| got.push(claim_next(&ws, "e1"));
    // The first claim warms the connection; the second prepares the pick (in the server
    // session the pooler gave it, which it gives back after each transaction).
    claim(&mut got);
    claim(&mut got);
    // Another client takes that session (the pooler hands out the one used last) and keeps
    // it in a transaction: the next claim runs in the other session.
    let (mut holder, mut to) = psql_session(
        "psql".as_ref(),
        &format!(
            "host={} port={} user=postgres dbname=postgres",
            bouncer.dir.display(),
            bouncer.port
        ),
    );
    writeln!(to, "BEGIN; SELECT 1;").unwrap();
    to.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    claim(&mut got);
    claim(&mut got);
    writeln!(to, "COMMIT;").unwrap();
    drop(to);
    holder.wait().unwrap();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 4, "four claims, four tasks: {got:?}");
    // The prepared pick was missed in the other session (else this test proved nothing).
    assert!(
        server_said_of_a_prepared_statement(c, "does not exist"),
        "no claim ran in a session without its prepared pick"
    );
}

/// `claim --next` by `agent` through the library: the task's id (a failure panics, saying
/// its hint).
fn claim_next(ws: &circe::workspace::Workspace, agent: &str) -> String {
    let (me, role) = ws.agent(Some(agent)).unwrap();
    let out = circe::ops::claim_next(ws, &me, &role, None).unwrap_or_else(|e| {
        panic!("{}: {}", e.chain(), e.hint.unwrap_or_default());
    });
    out.task.to_string()
}

/// The server logged `what` of one of circe's prepared statements (`circe_...`).
fn server_said_of_a_prepared_statement(c: &crate::pg_cluster::Cluster, what: &str) -> bool {
    let log = std::fs::read_to_string(c.dir.join("log")).unwrap_or_default();
    log.lines().any(|l| l.contains("prepared statement \"circe_") && l.contains(what))
}

/// Behind a transaction pooler the URL does not name, a warm claimer's `PREPARE` can land
/// in a server session another client prepared the same statement in: refused ("already
/// exists"), it aborts the transaction it went with, which is rolled back; the claim is
/// sent again as text and goes on.
#[test]
fn a_claimer_whose_prepare_is_refused_behind_a_pooler_goes_on_as_text() {
    use circe::engine::RootSpec;
    let c = need_pg!();
    let Ok(bouncer) = crate::pg_cluster::Bouncer::start(c, 1) else {
        eprintln!("skipped: pgbouncer is not installed");
        return;
    };
    let url = c.fresh_url();
    let root = Root::new(&url, "server", 2);
    root.open_tasks(4);
    let pooled = bouncer.url(&schema_of(&url));
    let mut got = Vec::new();
    // Two claimers, one server session: the first prepares the pick there on its second
    // claim, the second sends the same `PREPARE` into it on its own second claim.
    for agent in ["e1", "e2"] {
        let ws = circe::workspace::Workspace::open(&RootSpec::Url(pooled.clone())).unwrap();
        for _ in 0..2 {
            got.push(claim_next(&ws, agent));
        }
    }
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 4, "four claims, four tasks: {got:?}");
    assert!(
        server_said_of_a_prepared_statement(c, "already exists"),
        "no claim's PREPARE was refused"
    );
}

/// Every commit waits for the feed's row until the `COMMIT` of the one that holds it, so a
/// commit takes it last: a claim whose grant is held up (another transaction writing the
/// same agent and request id, left open) has not taken the feed's row meanwhile, and goes
/// through once that transaction ends.
#[test]
fn a_claim_held_up_at_its_grant_leaves_the_feed_to_others() {
    use std::io::Write as _;
    use std::time::{Duration, Instant};

    let c = need_pg!();
    let url = c.fresh_url();
    let schema = schema_of(&url);
    let root = Root::new(&url, "server", 1);
    root.open_tasks(1);
    let (mut holder, mut to) = psql_session(
        &c.bin.join("psql"),
        &format!(
            "host={} port={} user=postgres dbname=postgres application_name=held_{schema}",
            c.socket.display(),
            c.port
        ),
    );
    writeln!(
        to,
        "BEGIN; INSERT INTO \"{schema}\".grants (agent, request, task, epoch) \
         VALUES ('e1', 'rq-held', 'T-000', 1);"
    )
    .unwrap();
    to.flush().unwrap();
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity a, pg_stat_activity h \
         WHERE h.application_name = 'held_{schema}' AND h.pid = ANY(pg_blocking_pids(a.pid))"
    );
    let free = format!(
        "SELECT count(*) FROM (SELECT 1 FROM \"{schema}\".feed WHERE id = 1 \
         FOR UPDATE SKIP LOCKED) x"
    );
    let holding = format!(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE application_name = 'held_{schema}' AND state = 'idle in transaction'"
    );
    let until = Instant::now() + Duration::from_secs(8);
    while c.psql(&holding).trim() != "1" {
        assert!(Instant::now() < until, "the other transaction never wrote the grant");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::scope(|s| {
        let claim =
            s.spawn(|| root.run(Some("e1"), &["claim", "T-000", "--request-id", "rq-held"]));
        let until = Instant::now() + Duration::from_secs(8);
        while c.psql(&waiting).trim() != "1" {
            assert!(Instant::now() < until, "the claim never waited for the grant");
            std::thread::sleep(Duration::from_millis(50));
        }
        let feed_free = c.psql(&free);
        writeln!(to, "ROLLBACK;").unwrap();
        drop(to);
        holder.wait().unwrap();
        let out = claim.join().unwrap();
        assert_eq!(out.code, 0, "{} {}", out.stdout, out.stderr);
        assert_eq!(feed_free.trim(), "1", "the claim held the feed's row while it waited");
    });
    let grant = c.psql(&format!("SELECT task FROM \"{schema}\".grants WHERE request = 'rq-held'"));
    assert_eq!(grant.trim(), "T-000", "the claim wrote its grant once the other ended");
}
