//! Routing rules, TX's shape (reference 000 "Routing Rules"): in circe.yaml
//! `routing: {<agent or role>: {<status>: {<target>: <text>}}}`. When an agent's task or
//! message reaches a status its rules name, circe sends each target the text.
//!
//! Pure: which statuses a rule may name, the checks made when circe.yaml is loaded, the
//! closed-loop report, which rules fire, and the message circe sends.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::message::{Format, Message};
use crate::task::Status;

/// `routing:` as written: agent or role -> status -> target -> text.
pub type Routing = BTreeMap<String, Statuses>;

/// One agent's (or role's) rules: status -> target -> text.
pub type Statuses = BTreeMap<String, BTreeMap<String, String>>;

/// A status a routing rule may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RoutingKey {
    /// `complete` / `completed`: a task completed, or a message saying `complete`.
    Completed,
    /// `failed`: a task failed, or a message saying `failed`.
    Failed,
    /// `blocked`: a task blocked, or a message saying `blocked`.
    Blocked,
    /// `in-progress` / `in_progress`: a task started (or unblocked), or a message saying so.
    InProgress,
    /// `approved`: a message saying so (a task that completes is `complete`).
    Approved,
    /// `rejected`: a message saying so (a task that fails is `failed`).
    Rejected,
    /// `ready-for-next-iteration`: a message saying so (TX's "loop back").
    NextIteration,
}

impl RoutingKey {
    /// The TX spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingKey::Completed => "complete",
            RoutingKey::Failed => "failed",
            RoutingKey::Blocked => "blocked",
            RoutingKey::InProgress => "in-progress",
            RoutingKey::Approved => "approved",
            RoutingKey::Rejected => "rejected",
            RoutingKey::NextIteration => "ready-for-next-iteration",
        }
    }

    /// The key a status word in a rule names, or why it cannot be one.
    pub fn parse(word: &str) -> std::result::Result<RoutingKey, String> {
        Ok(match word {
            "complete" | "completed" => RoutingKey::Completed,
            "failed" => RoutingKey::Failed,
            "blocked" => RoutingKey::Blocked,
            "in-progress" | "in_progress" => RoutingKey::InProgress,
            "approved" => RoutingKey::Approved,
            "rejected" => RoutingKey::Rejected,
            "ready-for-next-iteration" => RoutingKey::NextIteration,
            "start" | "pending" | "new" | "claimed" | "parked" | "expired" => {
                return Err(format!(
                    "`{word}` is not reached by an agent's own report, so nothing can route on it"
                ));
            }
            _ => return Err(format!("unknown status `{word}`")),
        })
    }

    /// The key a task move to `status` fires.
    pub fn of_task(status: Status) -> Option<RoutingKey> {
        match status {
            Status::Completed => Some(RoutingKey::Completed),
            Status::Failed => Some(RoutingKey::Failed),
            Status::Blocked => Some(RoutingKey::Blocked),
            Status::InProgress => Some(RoutingKey::InProgress),
            _ => None,
        }
    }

    /// The key a message's `status:` header fires (its TX or CIRCE word).
    pub fn of_message(word: &str) -> Option<RoutingKey> {
        RoutingKey::parse(word).ok()
    }
}

/// The statuses a rule may name, for hints.
pub const KEYS: &str =
    "complete, failed, blocked, in-progress, approved, rejected, ready-for-next-iteration";

fn bad(what: &str) -> Error {
    Error::refused(format!("circe.yaml: routing: {what}")).hint(format!(
        "routing is `{{agent or role: {{status: {{target: text}}}}}}`; statuses: {KEYS}"
    ))
}

/// The checks that need no agents: names are names, statuses are routing keys (one spelling
/// each per agent), texts are single lines.
pub fn check_shape(routing: &Routing) -> Result<()> {
    let name_ok = |n: &str| {
        let parts: Vec<&str> = n.split('/').collect();
        parts.len() <= 2 && parts.iter().all(|p| crate::names::check_agent(p).is_ok())
    };
    for (who, statuses) in routing {
        if !name_ok(who) {
            return Err(bad(&format!("`{who}` is not an agent or role name")));
        }
        let mut seen = BTreeSet::new();
        for (status, targets) in statuses {
            let key = RoutingKey::parse(status).map_err(|r| bad(&format!("{who}: {r}")))?;
            if !seen.insert(key) {
                return Err(bad(&format!("{who}: `{}` is written twice", key.as_str())));
            }
            for (target, text) in targets {
                if !name_ok(target) || target == "all" {
                    return Err(bad(&format!(
                        "{who}.{status}: target `{target}` is not an agent or role name"
                    )));
                }
                if text.contains(['\n', '\r']) || text.chars().any(char::is_control) {
                    return Err(bad(&format!(
                        "{who}.{status}.{target}: the text must be one line"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The statuses written for `name` (a key written `mesh/name` counts as `name`).
fn rules_of<'a>(routing: &'a Routing, name: &str) -> Option<(&'a String, &'a Statuses)> {
    routing.iter().find(|(k, _)| crate::message::agent_of(k) == name)
}

/// The rules that fire when `agent` (with `role`) reaches `key`: those written for the agent,
/// else those written for its role. Returns the rule's name (`who.status`) and its targets.
pub fn firing<'a>(
    routing: &'a Routing,
    agent: &str,
    role: &str,
    key: RoutingKey,
) -> Option<(String, &'a BTreeMap<String, String>)> {
    [agent, role].into_iter().find_map(|who| {
        let (written, statuses) = rules_of(routing, who)?;
        statuses
            .iter()
            .find(|(s, _)| RoutingKey::parse(s) == Ok(key))
            .map(|(s, t)| (format!("{written}.{s}"), t))
    })
}

/// Sets of agents that route only among themselves: once a message enters one, routing never
/// leaves it (TX's "routing loops": no terminal state). `agents`: every agent and its role.
/// Each set is sorted; the sets are sorted.
pub fn closed_loops(routing: &Routing, agents: &[(String, String)]) -> Vec<Vec<String>> {
    let reach = |target: &str| -> Vec<usize> {
        let t = crate::message::agent_of(target);
        match agents.iter().position(|(a, _)| a == t) {
            Some(i) => vec![i],
            None => {
                agents.iter().enumerate().filter(|(_, (_, r))| r == t).map(|(i, _)| i).collect()
            }
        }
    };
    let edges: Vec<BTreeSet<usize>> = agents
        .iter()
        .map(|(a, r)| {
            let rules = rules_of(routing, a).or_else(|| rules_of(routing, r));
            rules
                .into_iter()
                .flat_map(|(_, s)| s.values())
                .flat_map(|targets| targets.keys())
                .flat_map(|t| reach(t))
                .collect()
        })
        .collect();
    // Reachability by search from each agent (routing tables are small).
    let reachable: Vec<BTreeSet<usize>> = (0..agents.len())
        .map(|start| {
            let mut seen = BTreeSet::new();
            let mut stack: Vec<usize> = edges[start].iter().copied().collect();
            while let Some(n) = stack.pop() {
                if seen.insert(n) {
                    stack.extend(edges[n].iter().copied());
                }
            }
            seen
        })
        .collect();
    let mut out: BTreeSet<Vec<String>> = BTreeSet::new();
    for i in 0..agents.len() {
        if !reachable[i].contains(&i) {
            continue; // not on a cycle
        }
        let scc: BTreeSet<usize> =
            reachable[i].iter().copied().filter(|&j| reachable[j].contains(&i)).collect();
        let leaves = scc.iter().any(|&n| edges[n].iter().any(|m| !scc.contains(m)));
        if !leaves {
            out.insert(scc.iter().map(|&n| agents[n].0.clone()).collect());
        }
    }
    out.into_iter().collect()
}

/// What fired: the rule, who reached which status, and about what.
pub struct Trigger<'a> {
    /// `who.status` as written in circe.yaml.
    pub rule: &'a str,
    pub by: &'a str,
    pub key: RoutingKey,
    pub task: Option<&'a str>,
    /// The message that reached the status, if a message did.
    pub in_reply_to: Option<&'a str>,
}

/// The message circe sends a routing target: a TX `update` from `circe`, in TX front matter.
pub fn routed_message(
    t: &Trigger<'_>,
    target: &str,
    text: &str,
    now: DateTime<Utc>,
    msg_id: String,
) -> Message {
    let mut m = Message::new(Format::FrontMatter);
    m.from = Some(crate::event::CIRCE.to_string());
    m.to = Some(target.to_string());
    m.intent = Some("update".into());
    m.task_id = t.task.map(str::to_string);
    m.status = Some(t.key.as_str().to_string());
    m.created_at = Some(now);
    m.msg_id = Some(msg_id);
    m.in_reply_to = t.in_reply_to.map(str::to_string);
    if !text.is_empty() {
        m.headline = Some(text.to_string());
    }
    m.extra.push(("requester".into(), t.by.to_string()));
    m.extra.push(("routed-by".into(), t.rule.to_string()));
    let about = t.task.map_or_else(String::new, |task| format!(" (task {task})"));
    m.body = format!(
        "\n{text}\n\n{} reached `{}`{about}; circe.yaml routing `{}` sends this to {target}.\n",
        t.by,
        t.key.as_str(),
        t.rule
    );
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routing(yaml: &str) -> Routing {
        crate::yaml::from_str(yaml).unwrap()
    }

    /// Reference 000's tdd-cycle mesh, in circe.yaml's YAML.
    const TDD: &str = "\
red-phase:
  complete: {green-phase: Test written and documented}
  blocked: {core: Cannot write test - missing requirements}
green-phase:
  complete: {refactor-phase: All tests pass}
  failed: {red-phase: Tests fail - revise test}
";

    fn agents(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| ((*n).to_string(), "engineer".to_string())).collect()
    }

    #[test]
    fn the_reference_mesh_checks_and_fires() {
        let r = routing(TDD);
        check_shape(&r).unwrap();
        let (rule, targets) = firing(&r, "red-phase", "engineer", RoutingKey::Completed).unwrap();
        assert_eq!(rule, "red-phase.complete");
        assert_eq!(targets["green-phase"], "Test written and documented");
        assert!(firing(&r, "red-phase", "engineer", RoutingKey::Failed).is_none());
        assert!(firing(&r, "core", "coordinator", RoutingKey::Completed).is_none());
        let meshed = routing("tdd/red-phase: {complete: {tdd/green-phase: go}}\n");
        let (rule, _) = firing(&meshed, "red-phase", "engineer", RoutingKey::Completed).unwrap();
        assert_eq!(rule, "tdd/red-phase.complete");
        let all = agents(&["red-phase", "green-phase", "refactor-phase", "core"]);
        assert!(closed_loops(&r, &all).is_empty(), "red <-> green leaves by blocked -> core");
    }

    #[test]
    fn a_closed_loop_is_reported() {
        let r = routing("a: {complete: {b: go}}\nb: {complete: {a: back}}\n");
        let loops = closed_loops(&r, &agents(&["a", "b", "c"]));
        assert_eq!(loops, [vec!["a".to_string(), "b".to_string()]]);
        let self_loop = routing("a: {failed: {a: retry}}\n");
        assert_eq!(closed_loops(&self_loop, &agents(&["a"])).len(), 1);
        let exits =
            routing("a: {complete: {b: go}}\nb: {complete: {a: back}, failed: {c: help}}\n");
        assert!(closed_loops(&exits, &agents(&["a", "b", "c"])).is_empty());
        // A rule for a role applies to the agents with it.
        let by_role = routing("engineer: {complete: {qa: test}}\nqa: {failed: {engineer: fix}}\n");
        let team = vec![("e1".into(), "engineer".into()), ("q1".into(), "qa".into())];
        assert_eq!(closed_loops(&by_role, &team), [vec!["e1".to_string(), "q1".to_string()]]);
    }

    #[test]
    fn bad_rules_are_refused() {
        for (yaml, says) in [
            ("a: {done: {b: x}}", "unknown status `done`"),
            ("a: {start: {b: x}}", "nothing can route"),
            ("a: {complete: {b: x}, completed: {c: y}}", "written twice"),
            ("A: {complete: {b: x}}", "not an agent or role"),
            ("a: {complete: {all: x}}", "target `all`"),
            ("a: {complete: {x/y/z: x}}", "target"),
        ] {
            let e = check_shape(&routing(yaml)).unwrap_err();
            assert!(e.message.contains(says), "{yaml}: {}", e.message);
            assert!(e.message.starts_with("circe.yaml: routing:"), "{}", e.message);
        }
        assert_eq!(RoutingKey::of_task(Status::Claimed), None);
        assert_eq!(RoutingKey::of_message("start"), None);
        assert_eq!(RoutingKey::of_message("complete"), Some(RoutingKey::Completed));
    }

    #[test]
    fn the_routed_message_parses_and_says_why() {
        let t = Trigger {
            rule: "red-phase.complete",
            by: "red-phase",
            key: RoutingKey::Completed,
            task: Some("T-1"),
            in_reply_to: None,
        };
        let now = crate::clock::parse("2025-10-30T10:00:00Z").unwrap();
        let m = routed_message(&t, "green-phase", "Test written", now, "r-1".into());
        let text = crate::message::render(&m);
        let back = crate::message::parse(&text, crate::message::Mode::Stored).unwrap();
        assert_eq!(back, m);
        assert!(text.contains("routed-by: red-phase.complete"), "{text}");
    }
}
