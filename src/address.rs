//! Addresses: what a message's `to` names (PROTOCOLS.md section 2, "Addresses").
//!
//! `role:NAME` is a role (every agent that has it; for a task, any of them may claim it),
//! `agent:NAME` one agent, `all` everyone. A bare NAME is the role when a role has that
//! name, else the agent: `init` makes an agent named after every role, and `--to engineer`
//! must reach every engineer, including ones added later. Pure: which names are roles is
//! the caller's to say.

/// The prefix that makes an address a role.
pub const ROLE: &str = "role:";
/// The prefix that makes an address one agent.
pub const AGENT: &str = "agent:";

/// What an address names, before it is resolved against a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Address<'a> {
    /// `all`.
    All,
    /// `role:NAME`.
    Role(&'a str),
    /// `agent:NAME`.
    Agent(&'a str),
    /// A bare name: a role if one has that name, else an agent.
    Bare(&'a str),
}

impl<'a> Address<'a> {
    /// Read an address as written (a TX `mesh/agent` reads as its agent part).
    pub fn parse(to: &'a str) -> Address<'a> {
        if to == crate::registry::BROADCAST {
            return Address::All;
        }
        if let Some(r) = to.strip_prefix(ROLE) {
            return Address::Role(r);
        }
        if let Some(a) = to.strip_prefix(AGENT) {
            return Address::Agent(a);
        }
        Address::Bare(crate::message::agent_of(to))
    }

    /// The name without its prefix (`all` for everyone): the label in a file name.
    pub fn name(self) -> &'a str {
        match self {
            Address::All => crate::registry::BROADCAST,
            Address::Role(n) | Address::Agent(n) | Address::Bare(n) => n,
        }
    }

    /// The role this address names, given which names are roles; `None` for an agent or
    /// `all`.
    pub fn role(self, is_role: impl Fn(&str) -> bool) -> Option<&'a str> {
        match self {
            Address::Role(r) => Some(r),
            Address::Bare(n) if is_role(n) => Some(n),
            _ => None,
        }
    }

    /// The agent this address names, given which names are roles.
    pub fn agent(self, is_role: impl Fn(&str) -> bool) -> Option<&'a str> {
        match self {
            Address::Agent(a) => Some(a),
            Address::Bare(n) if !is_role(n) => Some(n),
            _ => None,
        }
    }
}

/// Check an address's grammar: `all`, `role:NAME`, `agent:NAME`, a bare NAME, or TX
/// `mesh/agent`; every name follows the agent-name rule.
pub fn check(to: &str) -> crate::error::Result<()> {
    if let Some(n) = to.strip_prefix(ROLE) {
        return crate::names::check_role(n);
    }
    if let Some(n) = to.strip_prefix(AGENT) {
        return crate::names::check_agent(n);
    }
    if let Some((kind, _)) = to.split_once(':') {
        return Err(crate::error::Error::refused(format!(
            "address `{}` starts with `{}:`, which is no kind of address",
            crate::error::one_line(to),
            crate::error::one_line(kind)
        ))
        .hint("write `role:NAME`, `agent:NAME`, `NAME`, `all` or TX `mesh/agent`"));
    }
    let segments: Vec<&str> = to.split('/').collect();
    if segments.len() > 2 {
        return Err(crate::error::Error::refused(format!(
            "address `{}` has more than one `/`",
            crate::error::one_line(to)
        ))
        .hint("write `role:NAME`, `agent:NAME`, `NAME`, `all` or TX `mesh/agent`"));
    }
    if let [mesh, _] = segments.as_slice() {
        crate::names::check_mesh(mesh)?;
    }
    crate::names::check_agent(segments.last().copied().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_resolve() {
        let roles = |n: &str| matches!(n, "engineer" | "qa");
        assert_eq!(Address::parse("all"), Address::All);
        assert_eq!(Address::parse("role:qa"), Address::Role("qa"));
        assert_eq!(Address::parse("agent:qa"), Address::Agent("qa"));
        assert_eq!(Address::parse("mesh/qa"), Address::Bare("qa"));
        assert_eq!(Address::parse("engineer").role(roles), Some("engineer"));
        assert_eq!(Address::parse("engineer").agent(roles), None);
        assert_eq!(Address::parse("engineer-2").agent(roles), Some("engineer-2"));
        assert_eq!(Address::parse("agent:engineer").agent(roles), Some("engineer"));
        assert_eq!(Address::parse("role:devops").role(roles), Some("devops"));
        assert_eq!(Address::parse("role:qa").name(), "qa");
        assert!(check("role:engineer").is_ok());
        assert!(check("agent:engineer-2").is_ok());
        let msg = |to: &str| check(to).unwrap_err().message;
        assert!(msg("role:Engineer").starts_with("role name `Engineer` has capital"));
        assert!(msg("agent:Bob").starts_with("agent name `Bob`"));
        assert!(msg("foo:bar").contains("`foo:`, which is no kind of address"));
        assert!(check("role:").is_err());
        assert!(check("a/b/c").is_err());
        assert!(check("mesh/qa").is_ok());
    }
}
