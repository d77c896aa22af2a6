//! Who may take which waiting task: what `claim --next` asks the engine to filter on.

use crate::names::AgentName;

/// The waiting tasks an agent may take: those addressed to it by name, and those addressed
/// to one of `addresses` (`all`, its role) with an intent its role may receive. A plain
/// list, so that an engine can filter lanes by it or a database in SQL.
#[derive(Debug, Clone)]
pub struct Eligibility {
    pub agent: AgentName,
    pub addresses: Vec<String>,
    pub intents: Vec<String>,
}

impl Eligibility {
    /// May the agent take a task addressed to `to` with `intent`?
    pub fn admits(&self, to: &str, intent: &str) -> bool {
        to == self.agent.as_str()
            || self.addresses.iter().any(|a| a == to) && self.intents.iter().any(|i| i == intent)
    }
}
