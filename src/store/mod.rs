//! The store: the only layer that touches the filesystem.
//!
//! Everything above speaks in boxes, tasks and records; this layer turns them into paths
//! and makes every change atomic (temp file, fsync, no-clobber rename, fsync the folder),
//! following shared/FS_RULES.md. Layout (PROTOCOLS.md "Layout"):
//!
//! ```text
//! .circe/circe.yaml                 configuration
//! .circe/NEW_MESSAGES/              task messages waiting to be claimed
//! .circe/AGENTS/<a>/agent.yaml      the agent's role
//! .circe/AGENTS/<a>/INBOX/          messages for the agent
//! .circe/AGENTS/<a>/WORKSPACE/      messages the agent is working on
//! .circe/LOGS/                      handled messages, and events.jsonl
//! .circe/TASKS/<id>.status|.owner|.checks
//! .circe/queue/                     claim --next lanes (derived, rebuildable)
//! .circe/locks/                     lock files (never renamed or deleted)
//! .circe/tmp/                       staging (same filesystem, never watched)
//! ```

mod atomic;
mod fault;
mod lock;
mod mailbox;
mod root;

pub use fault::crash_point;
pub use lock::Lock;
pub use mailbox::Mailbox;
pub use root::{Durability, Store, find_root};

/// This machine's host name (for `.owner` records), or `localhost`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}
