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

pub use fault::{crash_point, test_break};
pub use lock::Lock;
pub use mailbox::Mailbox;
pub use root::{Durability, Store, find_root, root_at};

/// This machine's host name (for `.owner` records), or `localhost`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Read a file a user named on the command line (`--file`, `validate`): symlinks, FIFOs,
/// devices and folders are refused before anything is read (FS_RULES 12).
pub fn read_input_file(path: &std::path::Path) -> crate::error::Result<Vec<u8>> {
    use crate::error::Error;
    atomic_read(path).map_err(|e| match (e.kind(), e.raw_os_error()) {
        (std::io::ErrorKind::NotFound, _) => {
            Error::not_found(format!("no file {}", path.display()))
        }
        (_, Some(40)) => Error::refused(format!(
            "{} is a symbolic link; circe does not follow links",
            path.display()
        ))
        .hint("pass the path of the file itself"),
        (std::io::ErrorKind::InvalidInput, _) => {
            Error::refused(format!("{} is not a regular file", path.display()))
                .hint("FIFOs, devices and folders are refused; write the message to a file")
        }
        _ => Error::io("cannot read", path, e),
    })
}

fn atomic_read(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    atomic::read_regular(path)
}

/// Make a fresh, empty folder under the system temp dir (for `circe demo`).
pub fn make_temp_dir(prefix: &str) -> crate::error::Result<std::path::PathBuf> {
    let p = std::env::temp_dir().join(format!("{prefix}-{}", crate::clock::random_suffix()));
    std::fs::create_dir(&p).map_err(|e| crate::error::Error::io("cannot create", &p, e))?;
    Ok(p)
}

/// Read standard input whole (`send --file -`).
pub fn read_stdin() -> crate::error::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| crate::error::Error::io("cannot read", "standard input", e))?;
    Ok(buf)
}

/// This boot's id: derived files that are not fsynced are rebuilt after a reboot.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
