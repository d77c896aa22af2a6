//! Receivers in a local root (PROTOCOLS.md section 14): each agent's `lastSeen` in
//! `seen/<agent>.json`, changed under `locks/seen-<agent>.lock`, replaced atomically.

use std::io;
use std::path::PathBuf;

use super::atomic;
use super::lock::Lock;
use super::root::{Store, io_err, list_names};
use crate::error::{Error, Result};
use crate::names::AgentName;
use crate::seq::Receiver;

const SEEN_VERSION: u32 = 1;

/// `seen/<agent>.json`: `{"v": 1, "senders": {"LEAD": {"epoch", "last_seen", "msg_id"}},
/// "skipped": [...]}`.
#[derive(serde::Serialize, serde::Deserialize)]
struct SeenFile {
    v: u32,
    #[serde(flatten)]
    receiver: Receiver,
}

/// The text of `seen/<agent>.json` for `r`.
pub(super) fn seen_text(r: &Receiver) -> Vec<u8> {
    serde_json::to_vec(&SeenFile { v: SEEN_VERSION, receiver: r.clone() }).unwrap_or_default()
}

impl Store {
    fn seen_path(&self, agent: &AgentName) -> PathBuf {
        self.root.join("seen").join(format!("{agent}.json"))
    }

    /// `agent`'s lastSeen (empty when it has none). A file of a newer format is refused.
    pub(super) fn read_seen(&self, agent: &AgentName) -> Result<Receiver> {
        let p = self.seen_path(agent);
        let bytes = match atomic::read_regular(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Receiver::default()),
            Err(e) => return Err(Error::io("cannot read", &p, e)),
        };
        let file: SeenFile = serde_json::from_slice(&bytes).map_err(|e| {
            Error::internal(format!("{} does not parse: {e}", p.display()))
                .hint("remove it: the agent's lastSeen starts again from nothing")
        })?;
        if file.v > SEEN_VERSION {
            return Err(Error::refused(format!(
                "{} has format version {}, newer than this circe's {SEEN_VERSION}",
                p.display(),
                file.v
            ))
            .hint("upgrade circe"));
        }
        Ok(file.receiver)
    }

    /// Files of `seen/` that do not read (junk, a FIFO or a folder in place of one): (the
    /// file's name, why). A file of a newer format is not damage, and not listed.
    pub(super) fn damaged_seen(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        // A hidden name is a replacement being written (`.tmp-<pid>-…`): not looked at.
        let names = super::root::list_all_names(&self.root.join("seen"))?;
        for name in names.into_iter().filter(|n| !n.starts_with('.')) {
            let agent = name.strip_suffix(".json").and_then(|a| AgentName::new(a).ok());
            let why = match agent {
                Some(a) => match self.read_seen(&a) {
                    Err(e) if e.kind != crate::error::Kind::Refused => e.message,
                    _ => continue,
                },
                None => "no agent's lastSeen file".to_string(),
            };
            out.push((name, why));
        }
        Ok(out)
    }

    /// Move one of `damaged_seen` into `LOGS/quarantine/`: the agent's lastSeen starts
    /// again from nothing, which shows messages as new again, never hides one.
    pub(super) fn quarantine_seen(&self, name: &str) -> Result<String> {
        self.quarantine_from(&self.root.join("seen").join(name), "seen", name)
    }

    /// Change `agent`'s lastSeen under its lock; stored only when it changed. Not fsynced:
    /// after a power cut it may be older, which shows messages as new again, never hides one.
    pub(super) fn see(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Receiver) -> Result<()>,
    ) -> Result<(Receiver, Receiver)> {
        let _lock = Lock::acquire(
            &self.root.join("locks").join(format!("seen-{agent}.lock")),
            &format!("what {agent} has seen"),
        )?;
        let before = self.read_seen(agent)?;
        let mut after = before.clone();
        change(&mut after)?;
        if after != before {
            let dir = self.root.join("seen");
            std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
            let mut t = atomic::TempFile::write(&dir, &seen_text(&after), false)
                .map_err(io_err("cannot write", &dir))?;
            atomic::rename_replace(&t.path, &self.seen_path(agent))
                .map_err(io_err("cannot write", &self.seen_path(agent)))?;
            t.disarm();
        }
        Ok((before, after))
    }

    /// Every agent with a lastSeen that knows a sender, sorted.
    pub(super) fn receivers(&self) -> Result<Vec<(AgentName, Receiver)>> {
        let mut out = Vec::new();
        for n in list_names(&self.root.join("seen"))? {
            let Some(a) = n.strip_suffix(".json").and_then(|a| AgentName::new(a).ok()) else {
                continue;
            };
            let r = self.read_seen(&a)?;
            if !r.senders.is_empty() {
                out.push((a, r));
            }
        }
        Ok(out)
    }
}
