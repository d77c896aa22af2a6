//! `Registry`: the roles and intents in force, and the questions the rest of circe asks it.
//!
//! Built from the built-in table, optionally extended or narrowed by circe.yaml (`config`).
//! Sending checks live in `send_check`, the human table in `table`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::builtin::{BUILTIN_ROLES, builtin_intents};
use super::intent::Intent;
use crate::error::{Error, Result};

/// The roles and intents in force for one circe root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registry {
    pub roles: BTreeSet<String>,
    pub intents: BTreeMap<String, Intent>,
}

impl Registry {
    /// The built-in roles and intents, with no configuration applied.
    pub fn builtin() -> Registry {
        Registry {
            roles: BUILTIN_ROLES.iter().map(|&r| r.to_owned()).collect(),
            intents: builtin_intents().into_iter().map(|i| (i.name.clone(), i)).collect(),
        }
    }

    pub fn intent(&self, name: &str) -> Option<&Intent> {
        self.intents.get(name)
    }

    pub fn is_role(&self, name: &str) -> bool {
        self.roles.contains(name)
    }

    /// `role` (given as `what`, a flag) when it is one, else not found (exit 5) with the
    /// closest role and the list.
    pub fn known_role(&self, role: &str, what: &str) -> Result<()> {
        if self.is_role(role) {
            return Ok(());
        }
        let roles: Vec<&str> = self.roles.iter().map(String::as_str).collect();
        let near = crate::suggest::closest(role, roles.iter().copied())
            .map(|c| format!("did you mean `{c}`? "))
            .unwrap_or_default();
        Err(Error::not_found(format!("{what}: unknown role `{}`", crate::error::one_line(role)))
            .hint(format!("{near}roles: {}", roles.join(", "))))
    }

    /// Whether `role` (a known role) may send `intent` (a known intent).
    pub fn may_send(&self, role: &str, intent: &str) -> bool {
        self.is_role(role) && self.intent(intent).is_some_and(|i| i.from.contains(role))
    }

    /// Whether `role` (a known role) may receive `intent` (a known intent).
    pub fn may_receive(&self, role: &str, intent: &str) -> bool {
        self.is_role(role) && self.intent(intent).is_some_and(|i| i.to.contains(role))
    }

    /// The roles in `roles` that may receive `intent`, in the given order, without repeats.
    /// A broadcast (`to: all`) is delivered only to these.
    pub fn receivers<'r>(&self, intent: &str, roles: &[&'r str]) -> Vec<&'r str> {
        let mut out: Vec<&'r str> = Vec::new();
        for &r in roles {
            if self.may_receive(r, intent) && !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries() {
        let r = Registry::builtin();
        assert!(r.is_role("rooster"));
        assert!(!r.is_role("devops"));
        assert!(r.may_send("coordinator", "implement_feature"));
        assert!(!r.may_send("engineer", "implement_feature"));
        assert!(
            !r.may_send("devops", "inform"),
            "unknown roles may send nothing, even `any` intents"
        );
        assert!(!r.may_send("coordinator", "nonsense"));
        assert!(r.may_receive("engineer", "implement_feature"));
        assert!(!r.may_receive("qa", "implement_feature"));
        assert!(!r.may_receive("devops", "inform"));
    }

    #[test]
    fn receivers_filter_and_dedup() {
        let r = Registry::builtin();
        let all = ["qa", "engineer", "coordinator", "engineer"];
        assert_eq!(r.receivers("implement_feature", &all), vec!["engineer"]);
        assert_eq!(r.receivers("test_results", &all), vec!["engineer", "coordinator"]);
        assert_eq!(r.receivers("inform", &all), vec!["qa", "engineer", "coordinator"]);
        assert!(r.receivers("audit", &all).is_empty());
        assert!(r.receivers("nonsense", &all).is_empty());
    }
}
