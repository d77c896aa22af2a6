//! Who may take which waiting task: what `claim --next` asks the engine to filter on.

use chrono::{DateTime, Utc};

use super::Row;
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
    /// The same time, as a time (a lease's end is compared with it).
    pub at: DateTime<Utc>,
}

impl Eligibility {
    /// Which waiting tasks `me` (with `role`) may take by `registry`, at `at`: those
    /// addressed to it (`agent:NAME`, or its bare name when no role has that name: a role
    /// name means the role); and those addressed to `all` or to its role (bare or `role:`)
    /// whose intent its role may receive.
    pub fn of(
        registry: &crate::registry::Registry,
        me: &AgentName,
        role: &str,
        at: DateTime<Utc>,
    ) -> Eligibility {
        use crate::address;
        let mut direct = vec![format!("{}{me}", address::AGENT)];
        if !registry.is_role(me.as_str()) {
            direct.push(me.to_string());
        }
        let addresses =
            vec!["all".to_string(), role.to_string(), format!("{}{role}", address::ROLE)];
        let intents = registry
            .intents
            .values()
            .filter(|i| registry.may_receive(role, &i.name))
            .map(|i| i.name.clone())
            .collect();
        Eligibility {
            agent: me.clone(),
            direct,
            addresses,
            intents,
            now: crate::clock::stamp(at),
            at,
        }
    }

    /// May the agent take a task addressed to `to` with `intent`?
    pub fn admits(&self, to: &str, intent: &str) -> bool {
        self.direct.iter().any(|d| d == to)
            || self.addresses.iter().any(|a| a == to) && self.intents.iter().any(|i| i == intent)
    }

    /// Is a task with this deadline (a `clock::stamp`) still open at `now`?
    pub fn in_time(&self, deadline: Option<&str>) -> bool {
        deadline.is_none_or(|d| d > self.now.as_str())
    }

    /// May the agent take over the held task of this board row? Another agent holds it,
    /// its lease ran out by `now`, and it is addressed so that the agent may take it, still
    /// in time. When no task waits, `claim --next` takes such a task over, as `claim TASK`
    /// would (the claim's transaction decides: a row is only a candidate).
    pub fn may_take_over(&self, row: &Row<'_>) -> bool {
        self.lease_to_take_over(row).is_some_and(|lease| lease <= self.at)
    }

    /// When the lease of the held task of this row runs out (or ran out), if another agent
    /// holds it and this one may take it over then.
    pub fn lease_to_take_over(&self, row: &Row<'_>) -> Option<DateTime<Utc>> {
        let other = row.owner.as_deref() != Some(self.agent.as_str());
        let ours = other && self.admits(&row.to, &row.intent);
        let held = row.status.is_owned() && ours && self.in_time(row.deadline.as_deref());
        row.lease_expires_at.as_deref().filter(|_| held).and_then(crate::clock::parse)
    }
}
