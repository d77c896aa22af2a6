//! The checkers themselves can fail: each is run here on a deliberately broken variant.

use crate::common::{Env, assert_unchanged, top_level_keys};

#[test]
#[should_panic(expected = "added AGENTS/qa/INBOX/stray.md")]
fn assert_unchanged_sees_an_added_file() {
    let env = Env::local();
    let before = env.state();
    std::fs::write(env.root().join("AGENTS/qa/INBOX/stray.md"), "x").unwrap();
    assert_unchanged(&before, &env.state());
}

#[test]
#[should_panic(expected = "changed circe.yaml")]
fn assert_unchanged_sees_a_changed_file() {
    let env = Env::local();
    let before = env.state();
    std::fs::write(env.root().join("circe.yaml"), "version: 1\n").unwrap();
    assert_unchanged(&before, &env.state());
}

#[test]
#[should_panic(expected = "exit code of `circe --agent nobody inbox`")]
fn a_wrong_exit_code_fails() {
    let env = Env::new();
    env.as_("nobody", &["inbox"]).ok();
}

#[test]
#[should_panic(expected = "duplicate keys in event line")]
fn duplicate_event_keys_fail() {
    let env = Env::local();
    std::fs::write(env.root().join("LOGS/events.jsonl"), "{\"to\":\"new\",\"to\":\"all\"}\n")
        .unwrap();
    let _ = env.events();
}

#[test]
fn keys_are_read_in_order_with_duplicates() {
    assert_eq!(top_level_keys(r#"{"a":1,"b":{"a":2},"a":3}"#), ["a", "b", "a"]);
}

#[test]
fn a_changed_fixture_changes_its_transcript() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/race-lost");
    let steps = std::fs::read_to_string(here.join("steps")).unwrap();
    let broken = tempfile::tempdir().unwrap();
    // The other engineer claims first: a different winner, different exit codes.
    std::fs::write(
        broken.path().join("steps"),
        steps.replace("engineer: claim RACE-1\n", "engineer-2: claim RACE-1 --ttl 1m\n"),
    )
    .unwrap();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let good = crate::fixtures::transcript(&here, a.path());
    let bad = crate::fixtures::transcript(broken.path(), b.path());
    let strip = |s: &str, p: &std::path::Path| s.replace(&p.display().to_string(), "[P]");
    assert_ne!(strip(&good, a.path()), strip(&bad, b.path()));
    // Replaying the same fixture twice gives the same transcript (after redaction of ids).
    let c = tempfile::tempdir().unwrap();
    let again = crate::fixtures::transcript(&here, c.path());
    let ids =
        |s: String| s.lines().filter(|l| !l.starts_with("sent ")).collect::<Vec<_>>().join("\n");
    assert_eq!(ids(strip(&good, a.path())), ids(strip(&again, c.path())));
}
