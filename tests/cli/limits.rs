//! Bounds on what circe accepts: durations (flags and circe.yaml) and times at the edge of
//! what RFC 3339 can write. Nothing out of bounds panics or changes the root.

use crate::common::{Env, assert_unchanged};

const T: &str = "LIM-1";
const MSG: &str = "20251121_170000_coordinator-all_implement-feature_LIM-1.md";
/// The last second RFC 3339 can write with four-digit years.
const LAST: &str = "9999-12-31T23:59:59Z";

fn setup() -> Env {
    let env = Env::new();
    env.open_task(T);
    env
}

#[track_caller]
fn names_the_range(o: &crate::common::Out) {
    assert!(o.stderr.contains("1s") && o.stderr.contains("365d"), "{}", o.show());
    assert!(!o.stderr.contains("panicked"), "{}", o.show());
}

#[test]
fn a_ttl_out_of_range_is_a_usage_error_and_changes_nothing() {
    let env = setup();
    let before = env.state();
    for ttl in ["999999999d", "366d", "0s", "0", "99999999999999999999999s"] {
        let o = env.as_("engineer", &["claim", T, "--ttl", ttl]);
        o.code(2);
        names_the_range(&o);
        assert!(o.stderr.contains("--ttl"), "{}", o.show());
        let o = env.as_("engineer", &["claim", "--next", "--ttl", ttl]);
        o.code(2);
    }
    assert_unchanged(&before, &env.state());
    env.as_("engineer", &["claim", T, "--ttl", "1s"]).ok();
    let before = env.state();
    let o = env.as_("engineer", &["heartbeat", T, "--ttl", "999999999d"]);
    o.code(2);
    names_the_range(&o);
    assert_unchanged(&before, &env.state());
    let o = env.as_("engineer", &["heartbeat", T, "--ttl", "365d"]);
    o.ok();
    assert_eq!(env.record(T).lease_expires_at.as_deref(), Some("2026-11-21T17:00:00Z"));
}

#[test]
fn a_lease_out_of_range_in_circe_yaml_is_refused() {
    local_only!("edits circe.yaml and moves message files by hand");
    let env = setup();
    let yaml = env.read("circe.yaml").replace("lease: 30m", "lease: 999999999d");
    std::fs::write(env.root().join("circe.yaml"), yaml).unwrap();
    let before = env.state();
    for args in [&["claim", T][..], &["claim", "--next"], &["doctor", "--repair"], &["tasks"]] {
        let o = env.as_("engineer", args);
        o.code(3);
        names_the_range(&o);
        assert!(o.stderr.contains("circe.yaml: lease"), "{}", o.show());
    }
    assert_unchanged(&before, &env.state());
}

#[test]
fn a_lease_past_the_last_writable_time_is_an_error_not_a_panic() {
    local_only!("edits circe.yaml and moves message files by hand");
    let env = setup();
    let before = env.state();
    // (A clock past it with an offset, `9999-12-31T23:59:59-23:59`, is refused where it is
    // read: `hardening::a_time_past_the_writable_years_once_in_utc_is_refused`.)
    for now in [LAST, "9999-06-01T00:00:00Z"] {
        let o = env.at(now, "engineer", &["claim", T, "--ttl", "365d"]);
        o.code(1);
        assert!(o.stderr.contains(LAST), "{}", o.show());
        assert!(o.stderr.contains("hint:"), "{}", o.show());
    }
    assert_unchanged(&before, &env.state());
    env.as_("engineer", &["claim", T]).ok();
    let before = env.state();
    let o = env.at(LAST, "engineer", &["heartbeat", T]);
    o.code(1);
    assert!(o.stderr.contains(LAST), "{}", o.show());
    assert_unchanged(&before, &env.state());
    // A claim that crashed after its rename: reconciling at the edge of time is an
    // error (no record is written with a lease circe could not read back), then works.
    env.as_("engineer", &["release", T]).ok();
    std::fs::rename(
        env.root().join("NEW_MESSAGES").join(MSG),
        env.root().join("AGENTS/engineer/INBOX").join(MSG),
    )
    .unwrap();
    let o = env.at(LAST, "engineer", &["doctor", "--repair"]);
    o.code(1);
    assert!(o.stderr.contains(LAST), "{}", o.show());
    env.as_("engineer", &["doctor", "--repair"]).ok();
    assert_eq!(env.record(T).owner.as_deref(), Some("engineer"));
    // The first second and the last one are fine for anything without a lease.
    env.at("0000-01-01T00:00:00Z", "engineer", &["tasks"]).ok();
    env.at(LAST, "engineer", &["tasks", "--json"]).ok();
}
