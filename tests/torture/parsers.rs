//! Parser fuzzing (proptest): record, checks, config and fixture-step parsers never panic,
//! on arbitrary text and on mutations of valid input.

use proptest::prelude::*;

const STATUS: &str = "task_id: T1\nstatus: claimed\nowner: engineer\nupdated_at: \"2025-01-01T00:00:00Z\"\ncreated_at: \"2025-01-01T00:00:00Z\"\nintent: implement_feature\npriority: normal\nto: all\nopened_by: coordinator\nepoch: 1\nattempts: 1\nmessage: m.md\n";
const CONFIG: &str = "version: 1\nlease: 30m\nmax_attempts: 3\ndurability: full\nannounce: events\nregistry:\n  roles: []\n  intents: {}\n";
const STEPS: &str = "coordinator: send --to all --intent implement_feature --task A --summary \"x y\"\n@now 2025-11-21T17:05:00Z\n-: tasks\n## note\n";

/// Valid text with one slice replaced by arbitrary text.
fn mutate(base: &'static str) -> impl Strategy<Value = String> {
    (0..base.len(), 0..base.len(), ".{0,40}").prop_map(move |(a, b, ins)| {
        let (a, b) = (a.min(b), a.max(b));
        let (a, b) = (floor(base, a), floor(base, b));
        format!("{}{ins}{}", &base[..a], &base[b..])
    })
}

fn floor(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn status_record_parse_never_panics(s in "\\PC{0,300}", m in mutate(STATUS)) {
        let _ = circe::task::record::StatusRecord::parse("T1", &s);
        let _ = circe::task::record::StatusRecord::parse("T1", &m);
        let _ = circe::task::record::OwnerRecord::parse(&m);
    }

    #[test]
    fn checks_parse_never_panics(s in "\\PC{0,200}", m in mutate("tests_passed: true\npeer_reviewed: false\n")) {
        let _ = circe::task::record::parse_checks("T1", &s);
        if let Ok(c) = circe::task::record::parse_checks("T1", &m) {
            // What parses round-trips.
            let again = circe::task::record::parse_checks("T1", &circe::task::record::render_checks(&c));
            prop_assert!(again.is_ok());
        }
    }

    #[test]
    fn config_parse_never_panics(s in "\\PC{0,300}", m in mutate(CONFIG)) {
        let _ = circe::config::Config::parse(&s);
        if let Ok(c) = circe::config::Config::parse(&m) {
            let _ = c.lease();
            let _ = c.durability();
        }
    }

    #[test]
    fn fixture_steps_never_panic(s in "\\PC{0,300}", m in mutate(STEPS)) {
        let _ = circe::fixture::parse_steps(&s);
        let _ = circe::fixture::parse_steps(&m);
    }
}
