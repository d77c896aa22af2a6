//! The boxes a message can lie in (NEW_MESSAGES, each agent's INBOX and WORKSPACE, LOGS), as
//! the reference's retention table describes them.

mod mailbox;

pub use mailbox::Mailbox;
