//! Schema versions: a root made at version 2 (without TX state; a test build plays it with
//! `pg-schema-v2`) is refused by this circe until `circe init` migrates it through every later
//! version, in one transaction, keeping its agents, messages and tasks; then TX state and
//! asserted checks work on it. A hand-edited agents table is read as the local engine reads
//! a hand-made folder.

use std::io::Write;
use std::process::Stdio;

use crate::common::{Out, Root};

fn send(root: &Root, agent: &str, text: &str, brk: Option<&str>) -> Out {
    let mut c = root.command(Some(agent), &["send", "--file", "-"]);
    c.stdin(Stdio::piped());
    if let Some(b) = brk {
        c.env("CIRCE_TEST_BREAK", b);
    }
    let mut child = c.spawn().expect("spawn circe");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    Out::from(&child.wait_with_output().unwrap())
}

#[test]
fn circe_init_migrates_a_version_2_root_to_the_current_version() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let mut old = Root::at(&url);
    old.env.push(("CIRCE_TEST_BREAK".into(), "pg-schema-v2".into()));
    old.run(None, &["init", "--clock", "client"]).ok();
    old.run(None, &["agent", "add", "e1", "--role", "engineer"]).ok();
    let task = "---\nto: e1\ntype: task\nmsg-id: old-1\n---\n\nkept\n";
    send(&old, "coordinator", task, None).ok();
    let version = |c: &crate::pg_cluster::Cluster| {
        c.psql(&format!("SELECT value FROM \"{schema}\".meta WHERE key = 'schema_version'"))
    };
    assert_eq!(version(c).trim(), "2");
    assert!(!c.psql(&format!("SELECT to_regclass('\"{schema}\".asks')")).contains("asks"));

    let root = Root::at(&url);
    let o = root.run(None, &["tasks"]);
    assert_eq!(o.code, 3, "{o:?}");
    assert!(o.stderr.contains("schema version 2"), "{o:?}");
    // The hint names the root itself, so following it writes no folder where it is run.
    let hint = format!("`circe --root '{}' init`", root.url);
    assert!(o.stderr.contains(&hint), "{hint} in {o:?}");
    // Another clock is refused before the migration: nothing changed.
    let clock = root.run(None, &["init", "--clock", "server"]);
    assert_eq!(clock.code, 3, "{clock:?}");
    assert_eq!(version(c).trim(), "2", "the refusal migrated the schema");
    let made = root.run(None, &["init"]);
    assert!(made.ok().stdout.contains("schema: migrated from version 2 to 7"), "{made:?}");
    assert_eq!(version(c).trim(), "7");
    // The clock stays the one the root was made with: another is refused, not ignored.
    let clock = root.run(None, &["init", "--clock", "server"]);
    assert_eq!(clock.code, 3, "{clock:?}");
    assert!(clock.stderr.contains("the client clock"), "{clock:?}");
    // What the old root held is there, and what version 3 adds works on it.
    let tasks = root.run(None, &["tasks", "--json"]).ok().json();
    assert!(tasks.to_string().contains("old-1"), "{tasks}");
    root.run(Some("e1"), &["claim", "old-1"]).ok();
    let ask = "---\nto: e1\ntype: ask\nmsg-id: ask-1\ndeadline: 2030-01-01T00:00:00Z\n---\n?\n";
    send(&root, "coordinator", ask, None).ok();
    let asks = root.run(None, &["asks", "--json"]).ok().json();
    assert_eq!(asks["asks"][0]["msg_id"], "ask-1", "{asks}");
    let late = "---\nto: e1\ntype: task\nmsg-id: d-1\ndeadline: 2030-01-01T00:00:00Z\n---\n\nx\n";
    send(&root, "coordinator", late, None).ok();
    // Version 4: the old task's row has no asserted checks; an assertion is kept.
    let asserted = |c: &crate::pg_cluster::Cluster| {
        c.psql(&format!("SELECT asserted FROM \"{schema}\".tasks WHERE task_id = 'old-1'"))
    };
    assert_eq!(asserted(c).trim(), "[]");
    let send =
        ["send", "--to", "e1", "--intent", "implement_feature", "--task", "A-1", "--summary", "a"];
    root.run(Some("coordinator"), &send).ok();
    root.run(Some("e1"), &["claim", "A-1"]).ok();
    root.run(Some("e1"), &["status", "A-1", "in_progress"]).ok();
    root.run(Some("e1"), &["check", "A-1", "tests_passed=true"]).ok();
    let kept = c.psql(&format!("SELECT asserted FROM \"{schema}\".tasks WHERE task_id = 'A-1'"));
    assert_eq!(kept.trim(), "[\"tests_passed\"]");
    let board = root.run(None, &["tasks", "--json"]).ok().json();
    assert!(board.to_string().contains("\"checks_asserted\":1"), "{board}");
    // A second init changes nothing.
    root.run(None, &["init"]).ok();
    assert_eq!(version(c).trim(), "7");
}

/// `init --engine URL DIR` where DIR/.circe is a local root, or names another database root:
/// refused before the database is touched.
#[test]
fn init_refused_by_the_folder_leaves_the_database_untouched() {
    let c = need_pg!();
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| crate::common::run_in(dir.path(), args);
    run(&["init"]).ok();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let exists = || c.psql(&format!("SELECT to_regclass('\"{schema}\".meta')")).contains("meta");
    let local = run(&["init", "--engine", &url]);
    assert_eq!(local.code, 4, "{local:?}");
    assert!(local.stderr.contains("holds a local root") && local.stderr.contains("migrate --to"));
    assert!(!exists(), "the refusal made a root in the database");
    // A pointer to another database root.
    let other = c.fresh_url();
    std::fs::remove_dir_all(dir.path().join(".circe")).unwrap();
    run(&["init", "--engine", &other]).ok();
    let pointed = run(&["init", "--engine", &url]);
    assert_eq!(pointed.code, 4, "{pointed:?}");
    assert!(pointed.stderr.contains("names another database root"), "{pointed:?}");
    assert!(!exists(), "the refusal made a root in the database");
    // --root naming another database than --engine: which one was meant is unclear.
    let both = run(&["--root", &other, "init", "--engine", &url]);
    assert_eq!(both.code, 2, "{both:?}");
    assert!(!exists(), "the refusal made a root in the database");
    run(&["init", "--engine", &other]).ok();
    // `init DIR` beside a database root named by --root: which one to make is unclear; the
    // folder was left as it was, and the database made, while init said it was done.
    let folder = dir.path().join("elsewhere");
    let beside = run(&["--root", &url, "init", folder.to_str().unwrap()]);
    assert_eq!(beside.code, 2, "{beside:?}");
    assert!(beside.stderr.contains("--engine URL"), "{beside:?}");
    assert!(!folder.exists() && !exists(), "the refusal made a root");
}

#[test]
fn opening_a_schema_without_a_root_or_of_a_newer_circe_says_so_and_what_to_do() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let none = Root::at(&url).run(None, &["tasks"]);
    assert_eq!(none.code, 2, "{none:?}");
    assert!(none.stderr.contains(&format!("no circe root in schema {schema}")), "{none:?}");
    assert!(none.stderr.contains("circe init --engine '"), "{none:?}");
    let root = Root::new(&url, "server", 1);
    // A typo of a schema that holds a root: the team's root first, a new one last.
    let typo = format!("{url}x");
    let near = Root::at(&typo).run(None, &["tasks"]);
    assert_eq!(near.code, 2, "{near:?}");
    let said = near.stderr.clone();
    assert!(said.contains(&format!("did you mean schema `{schema}`?")), "{said}");
    let (team, new) =
        (said.find("pass the team's root with --root"), said.find("makes a new, empty one"));
    assert!(team.is_some() && team < new, "{said}");
    // The URL the hint gives keeps the server named apart (a pooler in front).
    let apart = Root::at(&format!("{typo}&listen_port={}", c.port)).run(None, &["tasks"]);
    assert!(
        apart.stderr.contains(&format!("listen_port={}&schema={schema}x'", c.port)),
        "{apart:?}"
    );
    // A root moved to a folder is no root to suggest: its every command is refused.
    c.psql(&format!("INSERT INTO \"{schema}\".meta VALUES ('moved_to', '/elsewhere')"));
    let moved = Root::at(&typo).run(None, &["tasks"]);
    // (Other tests' schemas, near in name, may be suggested: not this one.)
    assert!(!moved.stderr.contains(&format!("did you mean schema `{schema}`?")), "{moved:?}");
    c.psql(&format!("DELETE FROM \"{schema}\".meta WHERE key = 'moved_to'"));
    c.psql(&format!("UPDATE \"{schema}\".meta SET value = '99' WHERE key = 'schema_version'"));
    let newer = root.run(None, &["tasks"]);
    assert_eq!(newer.code, 3, "{newer:?}");
    assert!(newer.stderr.contains("schema version 99"), "{newer:?}");
    assert!(newer.stderr.contains("upgrade circe"), "{newer:?}");
    // A version changed by hand into no number, or removed: the root is damaged, and the
    // way out is to put the version back, not an `init` (which cannot tell what the tables
    // are either). It was read as version 0, "init migrates it", and init then failed.
    for (edit, said) in [
        ("UPDATE {m} SET value = 'abc' WHERE key = 'schema_version'", "is `abc`, not a number"),
        ("DELETE FROM {m} WHERE key = 'schema_version'", "is missing"),
    ] {
        c.psql(&edit.replace("{m}", &format!("\"{schema}\".meta")));
        for args in [&["tasks"][..], &["init"][..]] {
            let out = root.run(None, args);
            assert_eq!(out.code, 1, "{args:?}: {out:?}");
            assert!(out.stderr.contains(&format!("schema {schema} is damaged")), "{out:?}");
            assert!(out.stderr.contains(said), "{out:?}");
            let put = format!("SET value = '{}' WHERE", circe::engine::postgres::SCHEMA_VERSION);
            assert!(out.stderr.contains(&put), "{out:?}");
            assert!(!out.stderr.contains("migrates it"), "{out:?}");
        }
    }
}

/// A hand-edited agents table holding a name that is no agent name: the retired agents read
/// with the opening and every later read of them pass it over alike (as the local engine
/// passes over such a folder), so a command neither fails on it nor sees it.
#[test]
fn a_retired_row_without_an_agent_name_is_passed_over_by_every_read() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = Root::new(&url, "server", 2);
    root.run(Some("coordinator"), &["agent", "retire", "e2"]).ok();
    c.psql(&format!(
        "INSERT INTO \"{schema}\".agents (name, role, retired_at) \
         VALUES ('not an agent', 'engineer', '2026-01-01T00:00:00Z')"
    ));
    let eng = root.engine();
    let names = |v: Vec<(circe::names::AgentName, String)>| -> Vec<String> {
        v.into_iter().map(|(n, _)| n.as_str().to_string()).collect()
    };
    // The first question is answered by the opening's read; the second reads again.
    let first = names(eng.retirements().expect("the retired agents read with the opening"));
    let again = names(eng.retirements().expect("the retired agents read again"));
    assert_eq!(first, ["e2"]);
    assert_eq!(again, first);
    root.run(Some("e1"), &["tasks"]).ok();
}

/// `circe config` on a database root shows the stored settings, and says which of those
/// set the database makes moot (`durability` other than full: the server's commit is
/// durable; `archive`: `circe archive` is for folder roots), on stderr and in `warnings`,
/// and so does `config --set`. The default configuration (`durability: full`, no
/// `archive`) has nothing to warn of.
#[test]
fn config_on_a_database_root_says_which_settings_do_not_apply() {
    let c = need_pg!();
    let root = Root::new(&c.fresh_url(), "server", 1);
    let out = root.run(None, &["config", "--json"]);
    let v = out.ok().json();
    assert!(v["config"].as_str().unwrap().contains("durability: full"), "{out:?}");
    assert_eq!(v["warnings"], serde_json::json!([]), "{out:?}");
    assert!(!out.stderr.contains("warning"), "{out:?}");
    let moot = v["config"]
        .as_str()
        .unwrap()
        .replace("durability: full", "durability: relaxed")
        .replace("registry:", "archive: {after: 1d}\nregistry:");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("moot.yaml");
    std::fs::write(&file, moot).unwrap();
    let set = root.run(None, &["config", "--set", file.to_str().unwrap(), "--json"]);
    let said = set.ok().json()["warnings"].to_string();
    assert!(said.contains("`durability: relaxed`") && said.contains("`archive`"), "{set:?}");
    assert!(set.stderr.contains("does not apply"), "{set:?}");
    let out = root.run(None, &["config", "--json"]);
    let said = out.ok().json()["warnings"].to_string();
    assert!(said.contains("`durability: relaxed`") && said.contains("`archive`"), "{out:?}");
    assert!(out.stderr.contains("does not apply"), "{out:?}");
}

/// A stored configuration that keeps the root from opening (edited by SQL, or set by a circe
/// that knows more keys) has no file to mend: `config` prints it as stored, with why, and
/// `config --set` replaces it. Before, both were refused like every other command, naming a
/// circe.yaml that does not exist, and only SQL could mend it.
#[test]
fn a_broken_stored_configuration_is_shown_and_replaced() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = Root::new(&url, "server", 1);
    let good = root.run(None, &["config"]).ok().stdout.clone();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fixed.yaml");
    std::fs::write(&file, &good).unwrap();
    let file = file.to_str().unwrap();
    for (edit, said) in [
        ("text || E'\\nbogus: 1\\n'", "unknown field `bogus`"),
        (
            "replace(text, 'intents: {}', 'intents: {implement_feature: {from: [engineer]}}')",
            "widens the built-in rule",
        ),
    ] {
        c.psql(&format!("UPDATE \"{schema}\".config SET text = {edit}"));
        let refused = root.run(None, &["tasks"]);
        assert_eq!(refused.code, 3, "{refused:?}");
        assert!(refused.stderr.contains(said), "{refused:?}");
        assert!(
            refused.stderr.contains(&format!("circe --root '{url}' config --set FILE")),
            "{refused:?}"
        );
        let shown = root.run(None, &["config", "--json"]);
        assert_eq!(shown.code, 0, "{shown:?}");
        let v = shown.json();
        assert_eq!(v["broken"], true, "{v}");
        assert!(v["warnings"][0].as_str().unwrap().contains(said), "{v}");
        let stored = c.psql(&format!("SELECT text FROM \"{schema}\".config"));
        assert!(stored.contains(v["config"].as_str().unwrap().trim_end()), "{v}");
        let set = root.run(None, &["config", "--set", file, "--json"]);
        assert_eq!(set.code, 0, "{set:?}");
        assert_eq!(set.json()["broken"], true, "{set:?}");
        root.run(None, &["tasks"]).ok();
        let again = root.run(None, &["config", "--json"]).json();
        assert_eq!(
            (again["broken"].clone(), again["config"].clone()),
            (false.into(), good.clone().into())
        );
    }
    // A configuration that opens is not replaced by the way out: `--set` checks it as ever.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "version: 1\ncolour: red\n").unwrap();
    let refused = root.run(None, &["config", "--set", bad.to_str().unwrap()]);
    assert_eq!(refused.code, 3, "{refused:?}");
    assert_eq!(root.run(None, &["config"]).ok().stdout, good);
}

/// A root whose `config` table lost its row (deleted by SQL) has no configuration: every
/// command, `config` too, says so, naming the table and the way out, and `config --set`
/// stores one again. Before, `config` printed an empty configuration said not to parse, and
/// `config --set` said the configuration "changed while it was being replaced" (exit 4).
#[test]
fn a_missing_stored_configuration_is_said_and_put_back() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = Root::new(&url, "server", 1);
    let good = root.run(None, &["config"]).ok().stdout.clone();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fixed.yaml");
    std::fs::write(&file, &good).unwrap();
    c.psql(&format!("DELETE FROM \"{schema}\".config"));
    for args in [&["tasks"][..], &["config"][..]] {
        let o = root.run(None, args);
        assert_eq!(o.code, 3, "{o:?}");
        assert!(o.stderr.contains("`config` table has no row"), "{o:?}");
        assert!(o.stderr.contains(&format!("circe --root '{url}' config --set FILE")), "{o:?}");
    }
    let set = root.run(None, &["config", "--set", file.to_str().unwrap(), "--json"]);
    assert_eq!(set.code, 0, "{set:?}");
    assert_eq!(set.json()["broken"], true, "{set:?}");
    root.run(None, &["tasks"]).ok();
    assert_eq!(root.run(None, &["config"]).ok().stdout, good);
}

/// Through a folder that points at the database: a broken stored configuration is shown
/// and replaced from there too, and a pointer file broken by hand is not shown (mended by
/// hand: `config --set` replaces a root's configuration, not a pointer). `init --engine` on a database whose stored configuration is broken is
/// refused with a hint that works from a folder holding no root yet (`--root URL`).
#[test]
fn a_broken_configuration_seen_through_a_pointer_names_the_way_out_that_applies() {
    let c = need_pg!();
    let url = c.fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_string();
    let root = Root::new(&url, "server", 1);
    let good = root.run(None, &["config"]).ok().stdout.clone();
    let dir = tempfile::tempdir().unwrap();
    let here = |args: &[&str]| {
        let mut cmd = root.command(None, args);
        cmd.env_remove("CIRCE_ROOT").current_dir(dir.path());
        Out::from(&cmd.output().unwrap())
    };
    here(&["init", "--engine", &url]).ok();
    let fixed = dir.path().join("fixed.yaml");
    std::fs::write(&fixed, &good).unwrap();
    c.psql(&format!("UPDATE \"{schema}\".config SET text = text || E'\\nbogus: 1\\n'"));
    // In a folder with no root yet, `init --engine` names the root in its hint.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut cmd = root.command(None, &["init", "--engine", &url]);
    cmd.env_remove("CIRCE_ROOT").current_dir(elsewhere.path());
    let init = Out::from(&cmd.output().unwrap());
    assert_eq!(init.code, 3, "{init:?}");
    assert!(init.stderr.contains(&format!("circe --root '{url}' config")), "{init:?}");
    let shown = here(&["config", "--json"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.json()["warnings"][0].as_str().unwrap().contains("config --set FILE"));
    let set = here(&["config", "--set", fixed.to_str().unwrap(), "--json"]);
    assert_eq!(set.code, 0, "{set:?}");
    assert_eq!(set.json()["broken"], true, "{set:?}");
    here(&["tasks"]).ok();
    // The pointer file itself broken by hand: `config` gives the opening's error (the file
    // is mended by hand), and never prints the file, whose URL may hold a password.
    let pointer = dir.path().join(".circe/circe.yaml");
    let text = std::fs::read_to_string(&pointer).unwrap();
    std::fs::write(&pointer, format!("{text}bogus: 1\n")).unwrap();
    let shown = here(&["config"]);
    assert_eq!(shown.code, 3, "{shown:?}");
    assert!(shown.stdout.is_empty(), "{shown:?}");
    assert!(!shown.stderr.contains("replace it whole"), "{shown:?}");
}

/// `init --engine URL` in a folder that names a database root by another URL: re-pointed at
/// URL when URL reaches the very same root (here through PgBouncer), saying so; refused as
/// before when it reaches another root (another schema behind the same pooler, or the same
/// schema name on another server), the folder left as it was.
#[test]
fn init_repoints_a_folder_at_the_same_root_reached_another_way() {
    let c = need_pg!();
    let bouncer = match crate::pg_cluster::Bouncer::start(c, 2) {
        Ok(b) => b,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| crate::common::run_in(dir.path(), args);
    let direct = c.fresh_url();
    let schema = direct.rsplit("schema=").next().unwrap().to_string();
    run(&["init", "--engine", &direct]).ok();
    let pointer = dir.path().join(".circe/circe.yaml");
    let read = || std::fs::read_to_string(&pointer).unwrap();
    let before = read();
    // Another root behind the pooler: refused, the folder as it was.
    let other_schema = c.fresh_url();
    let other_schema = other_schema.rsplit("schema=").next().unwrap();
    let other = bouncer.url(other_schema);
    let refused = run(&["init", "--engine", &other]);
    assert_eq!(refused.code, 4, "{refused:?}");
    assert!(refused.stderr.contains("names another database root"), "{refused:?}");
    assert_eq!(read(), before);
    // The same root through the pooler: re-pointed.
    let pooled = format!(
        "{}&listen_host={}&listen_port={}",
        bouncer.url(&schema),
        c.socket.display(),
        c.port
    );
    let moved = run(&["--json", "init", "--engine", &pooled]);
    let json = moved.ok().json();
    assert_eq!(json["pointer_written"], true, "{moved:?}");
    assert!(json["repointed_from"].as_str().is_some_and(|u| u.contains(&c.port.to_string())));
    let after = read();
    assert!(after.contains(&format!("port={}", bouncer.port)), "{after}");
    assert!(
        !dir.path()
            .join(".circe")
            .read_dir()
            .unwrap()
            .any(|e| { e.unwrap().file_name().to_string_lossy().starts_with(".tmp") })
    );
    // Commands in the folder reach the root through the pooler now.
    let agents = run(&["agent", "list"]);
    assert!(agents.ok().stdout.contains("engineer"), "{agents:?}");
    let said = run(&["init", "--engine", &direct]);
    assert!(said.ok().stdout.contains("names it now by this URL"), "{said:?}");
    // The same schema's name on another server is another root.
    let second = match crate::pg_cluster::start(&[]) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("another server's root not tried: {why}");
            return;
        }
    };
    let elsewhere = format!("{}&schema={schema}", second.base_url());
    let refused = run(&["init", "--engine", &elsewhere]);
    assert_eq!(refused.code, 4, "{refused:?}");
    assert!(refused.stderr.contains("names another database root"), "{refused:?}");
    assert_eq!(read(), before, "the folder names the root directly again");
}
