//! Who may take which waiting task: what `claim --next` asks the engine to filter on.

use crate::names::AgentName;

/// The waiting tasks an agent may take: those addressed to it (`direct`: `agent:NAME`, and
/// the bare NAME unless a role has that name), and those addressed to one of `addresses`
/// (`all`, its role bare and as `role:ROLE`) with an intent its role may receive. Plain
/// lists, so that an engine can filter lanes by them or a database in SQL.
#[derive(Debug, Clone)]
pub struct Eligibility {
    pub agent: AgentName,
    pub direct: Vec<String>,
    pub addresses: Vec<String>,
    pub intents: Vec<String>,
    /// The time of the claim (`clock::stamp`): a task whose deadline is not later is passed
    /// over.
    pub now: String,
}

impl Eligibility {
    /// May the agent take a task addressed to `to` with `intent`?
    pub fn admits(&self, to: &str, intent: &str) -> bool {
        self.direct.iter().any(|d| d == to)
            || self.addresses.iter().any(|a| a == to) && self.intents.iter().any(|i| i == intent)
    }

    /// Is a task with this deadline (a `clock::stamp`) still open at `now`?
    pub fn in_time(&self, deadline: Option<&str>) -> bool {
        deadline.is_none_or(|d| d > self.now.as_str())
    }
}
