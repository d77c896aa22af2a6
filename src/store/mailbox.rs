//! The boxes a message can lie in. A message is always in exactly one of them.

use std::fmt;

/// A box: `NEW_MESSAGES/`, an agent's `INBOX/` or `WORKSPACE/`, or `LOGS/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mailbox {
    NewMessages,
    Inbox(String),
    Workspace(String),
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
    pub fn agent(&self) -> Option<&str> {
        match self {
            Mailbox::Inbox(a) | Mailbox::Workspace(a) => Some(a),
            Mailbox::NewMessages | Mailbox::Logs => None,
        }
    }
}

impl fmt::Display for Mailbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rel_path())
    }
}
