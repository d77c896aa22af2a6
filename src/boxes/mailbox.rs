//! The boxes a message can lie in. A message is always in exactly one of them.

use std::fmt;

use crate::names::AgentName;

/// A box: `NEW_MESSAGES/`, an agent's `INBOX/` or `WORKSPACE/`, or `LOGS/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mailbox {
    NewMessages,
    Inbox(AgentName),
    Workspace(AgentName),
    Logs,
}

impl Mailbox {
    /// The path of this box relative to the root.
    pub fn rel_path(&self) -> String {
        match self {
            Mailbox::NewMessages => "NEW_MESSAGES".into(),
            Mailbox::Inbox(a) => format!("AGENTS/{a}/INBOX"),
            Mailbox::Workspace(a) => format!("AGENTS/{a}/WORKSPACE"),
            Mailbox::Logs => "LOGS".into(),
        }
    }

    /// Short name used in records and JSON: `new`, `inbox:<agent>`, `workspace:<agent>`, `logs`.
    pub fn label(&self) -> String {
        match self {
            Mailbox::NewMessages => "new".into(),
            Mailbox::Inbox(a) => format!("inbox:{a}"),
            Mailbox::Workspace(a) => format!("workspace:{a}"),
            Mailbox::Logs => "logs".into(),
        }
    }

    /// The agent whose box this is, if any.
    pub fn agent(&self) -> Option<&AgentName> {
        match self {
            Mailbox::Inbox(a) | Mailbox::Workspace(a) => Some(a),
            Mailbox::NewMessages | Mailbox::Logs => None,
        }
    }

    /// The box a label names (`new`, `inbox:<a>`, `workspace:<a>`, `logs`).
    pub fn from_label(label: &str) -> Option<Mailbox> {
        match label {
            "new" => Some(Mailbox::NewMessages),
            "logs" => Some(Mailbox::Logs),
            _ => {
                let (kind, agent) = label.split_once(':')?;
                let agent = AgentName::new(agent).ok()?;
                match kind {
                    "inbox" => Some(Mailbox::Inbox(agent)),
                    "workspace" => Some(Mailbox::Workspace(agent)),
                    _ => None,
                }
            }
        }
    }
}

impl fmt::Display for Mailbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rel_path())
    }
}
