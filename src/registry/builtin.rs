//! The built-in registry table: the CIRCE intents, the TX message types, and the standard roles.
//!
//! PROTOCOLS.md section 5 mirrors this table; change both together.
//! Wherever the coordinator may send an intent, the rooster (the human) may too: the table
//! spells `rooster` out rather than adding it at run time, so what you read is what applies.

use super::intent::Intent;
use super::roles::Roles;

/// The roles every registry knows. `rooster` is the human.
pub const BUILTIN_ROLES: [&str; 6] =
    ["coordinator", "engineer", "qa", "scribe", "eagle", "rooster"];

/// Sender or recipient side of a row: `ANY`, or role names joined with `|`.
const ANY: &str = "any";

/// One row: name, from, to, opens task, needs task id, reply, checks, description.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
    Option<&'static str>,
    &'static [&'static str],
    &'static str,
);

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // Task management (CIRCE): each opens a task named by its task_id.
    ("implement_feature", "coordinator|rooster", "engineer", true, true, Some("status_update"), &["tests_passed"], "request feature implementation"),
    ("fix_bug", ANY, "engineer", true, true, Some("status_update"), &["tests_passed"], "request a bug fix"),
    ("refactor", "coordinator|engineer|rooster", "engineer", true, true, Some("status_update"), &["tests_passed"], "request a code quality improvement"),
    ("review_code", "engineer", "engineer|scribe", true, true, None, &["peer_reviewed"], "request peer review"),
    ("test", "engineer", "qa", true, true, Some("test_results"), &["tests_passed"], "request testing"),
    ("audit", "scribe", "eagle", true, true, Some("audit_report"), &[], "request an audit"),
    ("document", ANY, "scribe", true, true, None, &[], "request documentation"),
    // Coordination (CIRCE).
    ("status_update", ANY, "coordinator", false, false, None, &[], "share progress"),
    ("request_help", ANY, ANY, false, false, Some("answer"), &[], "ask for assistance"),
    ("claim_task", ANY, "coordinator", false, true, None, &[], "declare ownership of a task"),
    ("release_task", ANY, "coordinator", false, true, None, &[], "free a task for others"),
    ("coordinate", ANY, ANY, false, false, None, &[], "synchronize work between agents"),
    // Communication (CIRCE).
    ("question", ANY, ANY, false, false, Some("answer"), &[], "ask a clarifying question"),
    ("answer", ANY, ANY, false, false, None, &[], "answer a question"),
    ("escalate", ANY, "coordinator|rooster", false, false, Some("answer"), &[], "request a human decision"),
    ("inform", ANY, ANY, false, false, None, &[], "share information"),
    // Quality (CIRCE).
    ("test_results", "qa", "coordinator|engineer", false, true, None, &[], "share test outcomes"),
    ("audit_report", "eagle", "coordinator|scribe", false, true, None, &[], "share audit findings"),
    ("approval_request", ANY, "coordinator|rooster", false, false, Some("answer"), &[], "request approval or sign-off"),
    // TX message types.
    ("ask", ANY, ANY, false, false, Some("ask-response"), &[], "request information and wait for the answer"),
    ("ask-human", ANY, "coordinator|rooster", false, false, Some("ask-response"), &[], "ask a person and wait for the answer"),
    ("ask-response", ANY, ANY, false, false, None, &[], "answer an ask"),
    ("task", ANY, ANY, true, true, Some("task-complete"), &[], "assign work, non-blocking"),
    ("task-complete", ANY, ANY, false, true, None, &[], "report a task finished"),
    ("update", ANY, ANY, false, false, None, &[], "one-way information, no reply expected"),
    ("prompt", "coordinator|rooster", ANY, false, false, None, &[], "inject an agent's prompt"),
];

fn roles(spec: &str) -> Roles {
    if spec == ANY { Roles::Any } else { Roles::only(spec.split('|')) }
}

/// The built-in intents, in table order.
pub fn builtin_intents() -> Vec<Intent> {
    ROWS.iter()
        .map(|&(name, from, to, opens_task, needs_task_id, reply, checks, description)| Intent {
            name: name.to_owned(),
            description: description.to_owned(),
            from: roles(from),
            to: roles(to),
            opens_task,
            needs_task_id,
            expects_reply: reply.map(str::to_owned),
            required_checks: checks.iter().map(|&c| c.to_owned()).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::registry::{Registry, Roles, SendCheck};

    const ALL: [&str; 6] = ["coordinator", "engineer", "qa", "scribe", "eagle", "rooster"];

    fn ok(r: &Registry, intent: &str, from: &str, to: &str) -> bool {
        r.check_send(&SendCheck {
            intent,
            from_role: from,
            to_roles: &[to],
            to_label: to,
            has_task_id: true,
        })
        .is_ok()
    }

    #[test]
    fn ships_exactly_these_intents() {
        let r = Registry::builtin();
        let mut names: Vec<&str> = r.intents.keys().map(String::as_str).collect();
        names.sort_unstable();
        let mut want = vec![
            "implement_feature",
            "fix_bug",
            "refactor",
            "review_code",
            "test",
            "status_update",
            "request_help",
            "claim_task",
            "release_task",
            "coordinate",
            "question",
            "answer",
            "escalate",
            "inform",
            "test_results",
            "audit_report",
            "approval_request",
            "audit",
            "document",
            "ask",
            "ask-human",
            "ask-response",
            "task",
            "task-complete",
            "update",
            "prompt",
        ];
        want.sort_unstable();
        assert_eq!(names, want);
        assert_eq!(r.roles.iter().map(String::as_str).collect::<Vec<_>>().len(), 6);
    }

    /// Every (intent, from, to) the reference Appendix allows, one case per alternative.
    #[test]
    fn appendix_rows_are_allowed() {
        let r = Registry::builtin();
        let mut cases = vec![
            ("implement_feature", "coordinator", "engineer"),
            ("test", "engineer", "qa"),
            ("test_results", "qa", "engineer"),
            ("test_results", "qa", "coordinator"),
            ("review_code", "engineer", "engineer"),
            ("review_code", "engineer", "scribe"),
            ("audit", "scribe", "eagle"),
            ("audit_report", "eagle", "scribe"),
            ("audit_report", "eagle", "coordinator"),
        ];
        for from in ALL {
            cases.push(("fix_bug", from, "engineer"));
            cases.push(("document", from, "scribe"));
            cases.push(("escalate", from, "coordinator"));
            cases.push(("escalate", from, "rooster"));
            cases.push(("status_update", from, "coordinator"));
            for to in ALL {
                cases.push(("coordinate", from, to));
            }
        }
        for (intent, from, to) in cases {
            assert!(ok(&r, intent, from, to), "{intent}: {from} -> {to} should be allowed");
        }
    }

    /// One refused case per side of each rule that is narrower than any -> any.
    #[test]
    fn representative_refusals() {
        let r = Registry::builtin();
        let cases = [
            ("implement_feature", "engineer", "engineer"),
            ("implement_feature", "coordinator", "qa"),
            ("fix_bug", "qa", "qa"),
            ("refactor", "qa", "engineer"),
            ("refactor", "coordinator", "scribe"),
            ("review_code", "qa", "engineer"),
            ("review_code", "coordinator", "engineer"),
            ("review_code", "engineer", "qa"),
            ("test", "qa", "qa"),
            ("test", "engineer", "engineer"),
            ("audit", "engineer", "eagle"),
            ("audit", "scribe", "scribe"),
            ("document", "coordinator", "engineer"),
            ("status_update", "engineer", "qa"),
            ("claim_task", "engineer", "engineer"),
            ("release_task", "engineer", "qa"),
            ("escalate", "engineer", "qa"),
            ("test_results", "engineer", "coordinator"),
            ("test_results", "qa", "scribe"),
            ("audit_report", "scribe", "coordinator"),
            ("audit_report", "eagle", "engineer"),
            ("approval_request", "engineer", "qa"),
            ("prompt", "engineer", "qa"),
        ];
        for (intent, from, to) in cases {
            assert!(!ok(&r, intent, from, to), "{intent}: {from} -> {to} should be refused");
        }
    }

    #[test]
    fn task_flags_and_checks() {
        let r = Registry::builtin();
        let opens: Vec<&str> =
            r.intents.values().filter(|i| i.opens_task).map(|i| i.name.as_str()).collect();
        assert_eq!(
            opens,
            [
                "audit",
                "document",
                "fix_bug",
                "implement_feature",
                "refactor",
                "review_code",
                "task",
                "test"
            ]
        );
        let needs: Vec<&str> = r
            .intents
            .values()
            .filter(|i| i.needs_task_id && !i.opens_task)
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(
            needs,
            ["audit_report", "claim_task", "release_task", "task-complete", "test_results"]
        );
        let checks = |n: &str| r.intent(n).unwrap().required_checks.clone();
        for n in ["implement_feature", "fix_bug", "refactor", "test"] {
            assert_eq!(checks(n), ["tests_passed"], "{n}");
        }
        assert_eq!(checks("review_code"), ["peer_reviewed"]);
        for n in ["audit", "document", "task"] {
            assert!(checks(n).is_empty(), "{n}");
        }
        assert!(r.intents.values().all(|i| i.opens_task || i.required_checks.is_empty()));
    }

    #[test]
    fn rooster_may_send_whatever_the_coordinator_may() {
        let r = Registry::builtin();
        for i in r.intents.values() {
            if i.from.contains("coordinator") {
                assert!(i.from.contains("rooster"), "{}", i.name);
            }
        }
        assert!(ok(&r, "implement_feature", "rooster", "engineer"));
        assert!(ok(&r, "prompt", "rooster", "qa"));
        assert!(!ok(&r, "test", "rooster", "qa"), "rooster only mirrors the coordinator");
    }

    #[test]
    fn replies_are_known_and_sendable_by_the_recipients() {
        let r = Registry::builtin();
        let pairs = [
            ("ask", "ask-response"),
            ("question", "answer"),
            ("test", "test_results"),
            ("audit", "audit_report"),
            ("task", "task-complete"),
            ("approval_request", "answer"),
        ];
        for (req, reply) in pairs {
            assert_eq!(r.intent(req).unwrap().expects_reply.as_deref(), Some(reply), "{req}");
        }
        for i in r.intents.values() {
            let Some(reply) = &i.expects_reply else { continue };
            let reply = r.intent(reply).unwrap_or_else(|| panic!("{}: unknown reply", i.name));
            for role in ALL.iter().filter(|role| i.to.contains(role)) {
                assert!(
                    reply.from.contains(role),
                    "{} -> {}: {role} cannot reply",
                    i.name,
                    reply.name
                );
            }
        }
    }

    #[test]
    fn rules_name_only_builtin_roles() {
        let r = Registry::builtin();
        for i in r.intents.values() {
            for side in [&i.from, &i.to] {
                if let Roles::Only(set) = side {
                    assert!(!set.is_empty(), "{}", i.name);
                    assert!(set.iter().all(|role| r.is_role(role)), "{}", i.name);
                }
            }
        }
    }
}
