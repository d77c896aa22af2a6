//! The intent registry: roles, intents, and who may send what to whom.
//! TEMPORARY STUB while the real module is written on branch `registry`.
#![allow(dead_code, unused_variables, clippy::pedantic)]
use crate::error::Result;
use std::collections::{BTreeMap, BTreeSet};
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
pub struct RegistryConfig {
    #[serde(default)]
    pub roles: Vec<String>,
}
#[derive(Debug, Clone, serde::Serialize)]
pub struct Intent {
    pub name: String,
    pub opens_task: bool,
    pub needs_task_id: bool,
    pub required_checks: Vec<String>,
}
#[derive(Debug, Clone)]
pub struct Registry {
    pub roles: BTreeSet<String>,
    pub intents: BTreeMap<String, Intent>,
}
impl Registry {
    pub fn builtin() -> Registry {
        let roles = ["coordinator", "engineer", "qa", "scribe", "eagle", "rooster"].iter().map(|s| s.to_string()).collect();
        let mut intents = BTreeMap::new();
        for (n, t, c) in [("implement_feature", true, vec!["tests_passed"]), ("test", true, vec!["tests_passed"]), ("inform", false, vec![]), ("test_results", false, vec![])] {
            intents.insert(n.to_string(), Intent { name: n.into(), opens_task: t, needs_task_id: t, required_checks: c.into_iter().map(String::from).collect() });
        }
        Registry { roles, intents }
    }
    pub fn from_config(c: &RegistryConfig) -> Result<Registry> { Ok(Self::builtin()) }
    pub fn intent(&self, name: &str) -> Option<&Intent> { self.intents.get(name) }
    pub fn is_role(&self, name: &str) -> bool { self.roles.contains(name) }
    pub fn may_send(&self, role: &str, intent: &str) -> bool { true }
    pub fn may_receive(&self, role: &str, intent: &str) -> bool { intent != "test" || role == "qa" }
}
