//! `circe agent add|list` and the acting agent.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use crate::common::{Env, assert_unchanged};

#[test]
fn add_and_list() {
    let env = Env::new();
    let out = env.circe(["agent", "add", "engineer-2", "--role", "engineer"]).run();
    out.ok();
    assert_eq!(env.read("AGENTS/engineer-2/agent.yaml"), "role: engineer\n");
    assert!(env.root().join("AGENTS/engineer-2/INBOX").is_dir());
    assert!(env.root().join("AGENTS/engineer-2/WORKSPACE").is_dir());
    let list = env.circe(["agent", "list"]).run();
    list.ok();
    snap!(env, list);
    let j = env.circe(["agent", "list", "--json"]).run();
    j.ok();
    let j = j.json();
    assert!(
        j["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["agent"] == "engineer-2" && a["role"] == "engineer")
    );
}

#[test]
fn add_again_is_idempotent_but_a_different_role_conflicts() {
    let env = Env::new();
    env.circe(["agent", "add", "e2", "--role", "engineer"]).run().ok();
    let before = env.state();
    let again = env.circe(["agent", "add", "e2", "--role", "engineer", "--json"]).run();
    again.ok();
    assert_eq!(again.json()["created"], false);
    let other = env.circe(["agent", "add", "e2", "--role", "qa"]).run();
    other.code(4);
    // A conflict says what to do instead.
    assert!(other.stderr.contains("hint: an agent keeps its role"), "{}", other.show());
    assert_unchanged(&before, &env.state());
}

#[test]
fn bad_names_are_refused_and_nothing_is_created() {
    let env = Env::new();
    let before = env.state();
    let long = "a".repeat(65);
    for bad in
        ["../x", "a/b", "", "-a", ".a", long.as_str(), "A", "a_b", "a-", "circe", "all", "any"]
    {
        let out = env.circe(["agent", "add", bad, "--role", "engineer"]).run();
        // `-a` would parse as a flag; pass it after `--` too.
        if bad == "-a" {
            let out = env.circe(["agent", "add", "--role", "engineer", "--", bad]).run();
            out.code(3);
            continue;
        }
        out.code(3);
        assert!(out.stderr.contains("hint:"), "{}", out.show());
    }
    assert_unchanged(&before, &env.state());
    assert!(!env.path().join("x").exists());
}

#[test]
fn a_non_utf8_name_is_refused() {
    let env = Env::new();
    let before = env.state();
    let name = OsString::from_vec(vec![b'a', 0xff, b'b']);
    let out = env
        .circe([
            OsString::from("agent"),
            OsString::from("add"),
            name,
            "--role".into(),
            "engineer".into(),
        ])
        .run();
    out.code(3);
    assert_unchanged(&before, &env.state());
}

#[test]
fn unknown_role_is_refused() {
    let env = Env::new();
    let before = env.state();
    let out = env.circe(["agent", "add", "bob", "--role", "wizard"]).run();
    out.code(5);
    assert!(out.stderr.contains("unknown role"), "{}", out.show());
    snap!(env, out);
    let typo = env.circe(["agent", "add", "bob", "--role", "enginer"]).run();
    typo.code(5);
    assert!(typo.stderr.contains("did you mean `engineer`?"), "{}", typo.show());
    // A name in capitals is told its lower-case form.
    let caps = env.circe(["agent", "add", "QA-3", "--role", "qa"]).run();
    caps.code(3);
    assert!(caps.stderr.contains("names are lower case (`qa-3`)"), "{}", caps.show());
    assert_unchanged(&before, &env.state());
}

/// An acting agent named by `CIRCE_AGENT` that is no agent here (or no name at all) says
/// the name came from that variable; one given with `--agent` does not (the flag wins over
/// the variable, and is what the user typed).
#[test]
fn an_acting_agent_from_circe_agent_is_said_to_come_from_it() {
    let env = Env::new();
    let o = env.circe(["inbox"]).var("CIRCE_AGENT", "nobody").run();
    o.code(5);
    assert!(o.stderr.contains("no agent `nobody`"), "{}", o.show());
    assert!(o.stderr.contains("CIRCE_AGENT"), "{}", o.show());
    let o = env.circe(["inbox", "--json"]).var("CIRCE_AGENT", "../x").run();
    o.code(3);
    let said = o.json()["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(said.ends_with("(from CIRCE_AGENT)"), "{}", o.show());
    for o in [
        env.circe(["--agent", "nobody", "inbox"]).run(),
        env.circe(["--agent", "nobody", "inbox"]).var("CIRCE_AGENT", "engineer").run(),
    ] {
        o.code(5);
        assert!(!o.stderr.contains("CIRCE_AGENT"), "{}", o.show());
    }
}

#[test]
fn unknown_or_missing_acting_agent() {
    let env = Env::new();
    let before = env.state();
    let out = env.circe(["--agent", "nobody", "inbox"]).run();
    out.code(5);
    snap!(env, out);
    let j = env.as_("nobody", &["inbox", "--json"]);
    j.code(5);
    assert_eq!(j.json()["error"]["kind"], "not_found");
    let out = env.circe(["inbox"]).run();
    out.code(2);
    assert!(out.stderr.contains("--agent"), "{}", out.show());
    // A bad acting-agent name is refused before any path is built from it.
    env.as_("../engineer", &["inbox"]).code(3);
    assert_unchanged(&before, &env.state());
}
