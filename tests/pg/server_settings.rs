//! A server set up by someone else: an administrator's settings on circe's role, and roles
//! with fewer rights, change nothing circe promises (each role is the test's own, so the
//! shared cluster's other tests keep their settings).

use crate::common::Root;

/// A role of the test's own, `LOGIN` with `extra` rights, and the URL of a fresh schema as
/// that role.
fn role_url(c: &crate::pg_cluster::Cluster, name: &str, extra: &str) -> (String, String) {
    let role = format!("{name}_{}", std::process::id());
    c.psql(&format!("DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN {extra}"));
    let url = c.fresh_url().replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    (role, url)
}

/// `default_transaction_isolation = serializable` on circe's role: concurrent sends and
/// claims keep circe's outcomes (every send delivered and exit 0, every claim exit 0 or 6,
/// each task granted once), and nothing is left for doctor.
#[test]
fn a_serializable_default_on_the_role_changes_no_outcome() {
    let c = need_pg!();
    let (role, url) = role_url(c, "ser", "SUPERUSER");
    let r = Root::at(&url);
    r.run(None, &["init"]).ok();
    for a in 1..=4 {
        r.run(None, &["agent", "add", &format!("e{a}"), "--role", "engineer"]).ok();
    }
    r.open_tasks(12);
    c.psql(&format!("ALTER ROLE {role} SET default_transaction_isolation = 'serializable'"));
    let results: Vec<(String, i32)> = std::thread::scope(|s| {
        let hands: Vec<_> = (1..=4)
            .map(|a| {
                let r = &r;
                s.spawn(move || {
                    let me = format!("e{a}");
                    let mut out = Vec::new();
                    for k in 0..6 {
                        let q = format!("q {a} {k}");
                        let args = ["send", "--to", "coordinator", "--intent", "question"];
                        let o = r.run(Some(&me), &[&args[..], &["--summary", &q]].concat());
                        out.push((format!("send: {}", o.stderr), o.code));
                        let o = r.run(Some(&me), &["claim", "--next"]);
                        out.push((format!("claim: {}", o.stderr), o.code));
                    }
                    out
                })
            })
            .collect();
        hands.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let bad: Vec<_> = results
        .iter()
        .filter(|(what, code)| *code != 0 && !(what.starts_with("claim") && *code == 6))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    let claimed = results.iter().filter(|(w, code)| w.starts_with("claim") && *code == 0).count();
    assert_eq!(claimed, 12, "12 tasks waited: {results:#?}");
    let inbox = r.run(Some("coordinator"), &["inbox", "--json"]);
    assert_eq!(inbox.ok().json()["messages"].as_array().unwrap().len(), 24);
    r.run(None, &["doctor"]).ok();
}

/// The schema of `url` (its `schema=`).
fn schema_of(url: &str) -> String {
    url.rsplit_once("schema=").unwrap().1.split('&').next().unwrap().to_string()
}

/// A role that may not create schemas makes its root in a schema made for it beforehand;
/// a role that may only read is shown a task (`show`) and the board, and a change it tries
/// fails naming the grants circe's role needs.
#[test]
fn a_role_with_a_schema_made_for_it_inits_and_a_reader_reads() {
    let c = need_pg!();
    let (owner, url) = role_url(c, "own", "");
    let schema = schema_of(&url);
    c.psql(&format!("CREATE SCHEMA {schema} AUTHORIZATION {owner}"));
    let r = Root::at(&url);
    r.run(None, &["init"]).ok();
    r.open_tasks(1);
    let (reader, _) = role_url(c, "rd", "");
    c.psql(&format!(
        "GRANT USAGE ON SCHEMA {schema} TO {reader}; GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {reader}"
    ));
    let read = Root::at(&url.replacen(
        &format!("postgres://{owner}@"),
        &format!("postgres://{reader}@"),
        1,
    ));
    let tasks = read.run(None, &["tasks", "--json"]);
    let id = tasks.ok().json()["tasks"][0]["task_id"].as_str().unwrap().to_string();
    let show = read.run(None, &["show", &id]);
    assert!(show.ok().stdout.contains(&id), "{show:?}");
    read.run(None, &["board"]).ok();
    let claim = read.run(Some("engineer"), &["claim", &id]);
    assert_eq!(claim.code, 1, "{claim:?}");
    assert!(claim.stderr.contains("SELECT, INSERT, UPDATE, DELETE"), "{claim:?}");
    // Nothing changed: the owner claims it.
    r.run(Some("engineer"), &["claim", &id]).ok();
}

/// An administrator's `statement_timeout` shorter than circe's lock wait is named as what
/// ended the command (not "another command held it"); a role out of connection slots is
/// said as such, and as passing (`transient`).
#[test]
fn a_statement_timeout_and_full_connection_slots_are_named() {
    let c = need_pg!();
    // Not a superuser: a connection limit holds for others only.
    let (role, url) = role_url(c, "lim", "");
    let schema = schema_of(&url);
    c.psql(&format!("CREATE SCHEMA {schema} AUTHORIZATION {role}"));
    let r = Root::at(&url);
    r.run(None, &["init"]).ok();
    r.open_tasks(1);
    let id = r.run(None, &["tasks", "--json"]).json()["tasks"][0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    c.psql(&format!("ALTER ROLE {role} SET statement_timeout = '300ms'"));
    let o = std::thread::scope(|s| {
        s.spawn(|| {
            c.psql(&format!(
                "BEGIN; SELECT 1 FROM {schema}.tasks WHERE task_id = '{id}' FOR UPDATE; SELECT pg_sleep(2); COMMIT"
            ))
        });
        std::thread::sleep(std::time::Duration::from_millis(500));
        r.run(Some("engineer"), &["claim", &id])
    });
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.stderr.contains("statement_timeout"), "{o:?}");
    c.psql(&format!(
        "ALTER ROLE {role} RESET statement_timeout; ALTER ROLE {role} CONNECTION LIMIT 0"
    ));
    let o = r.run(None, &["tasks", "--json"]);
    assert_eq!(o.code, 1, "{o:?}");
    let e = &o.json()["error"];
    assert_eq!(e["details"]["transient"], true, "{o:?}");
    assert!(e["hint"].as_str().unwrap().contains("connection slot"), "{o:?}");
}
