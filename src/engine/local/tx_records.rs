//! What TX adds to a root: open asks (`ASKS/<msg id>.ask`, and the lock an answer under
//! way holds), each agent's current prompt (`AGENTS/<a>/prompt.md`) and retirement
//! (`retired_at` in `AGENTS/<a>/agent.yaml`).

use std::io;
use std::path::PathBuf;

use super::atomic::{self, TempFile};
use super::root::{Store, io_err, list_names};
use crate::error::{Error, Result};
use crate::names::{AgentName, MsgId};
use crate::tx::AskRecord;

/// What to do about an ask record that does not read.
const DAMAGED_ASK: &str = "put it back from a backup, or mend it by hand (`circe log` lists the ask's `send`); removed, the ask is no longer tracked (its message stays where it is)";

impl Store {
    fn ask_path(&self, id: &MsgId) -> PathBuf {
        self.root.join("ASKS").join(format!("{id}.ask"))
    }

    /// Replace `path` with `content` (temp file, fsync, rename, fsync the folder), making the
    /// folder first when it is missing (roots made before it existed).
    fn replace_file(&self, path: &std::path::Path, content: &[u8]) -> Result<()> {
        let dir = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
        std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
        let mut t = TempFile::write(&self.tmp_dir(), content, self.sync)
            .map_err(io_err("cannot write", &self.tmp_dir()))?;
        atomic::rename_replace(&t.path, path).map_err(io_err("cannot write", path))?;
        t.disarm();
        self.sync_dir(&dir)
    }

    fn read_optional(path: &std::path::Path) -> Result<Option<Vec<u8>>> {
        match atomic::read_regular(path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot read", path, e)),
        }
    }

    pub fn read_ask(&self, id: &MsgId) -> Result<Option<AskRecord>> {
        let Some(b) = Self::read_optional(&self.ask_path(id))? else { return Ok(None) };
        let text = String::from_utf8(b).map_err(|e| {
            let said = Error::not_utf8(format!("ASKS/{id}.ask"), e.as_bytes());
            Error::internal(said.message).hint(DAMAGED_ASK)
        })?;
        AskRecord::parse(&text).map(Some).map_err(|e| {
            Error::internal(format!("ASKS/{id}.ask does not read: {}", e.message)).hint(DAMAGED_ASK)
        })
    }

    /// The ask records that do not read, each with why (for doctor).
    pub fn damaged_asks(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for n in list_names(&self.root.join("ASKS"))? {
            let Some(id) = n.strip_suffix(".ask").and_then(|i| MsgId::new(i).ok()) else {
                continue;
            };
            if let Err(e) = self.read_ask(&id) {
                out.push((n, e.message));
            }
        }
        Ok(out)
    }

    /// Every ask record, by msg id (damaged ones are left out: doctor names them, and
    /// `asks` says how many).
    pub fn list_asks(&self) -> Result<Vec<AskRecord>> {
        let mut out = Vec::new();
        for n in list_names(&self.root.join("ASKS"))? {
            let Some(id) = n.strip_suffix(".ask").and_then(|i| MsgId::new(i).ok()) else {
                continue;
            };
            if let Ok(Some(r)) = self.read_ask(&id) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Write an ask record if the stored one is at revision `seen` (`None`: none stored),
    /// under the ask's lock. Returns it as stored (`rev` = seen + 1).
    pub fn put_ask(&self, rec: &AskRecord, seen: Option<u64>) -> Result<AskRecord> {
        let _lock = super::lock::Lock::acquire(
            &self.root.join("locks").join(format!("ask-{}.lock", rec.msg_id)),
            &format!("ask {}", rec.msg_id),
        )?;
        let now = self.read_ask(&rec.msg_id)?.map(|r| r.rev);
        if now != seen {
            return Err(Error::conflict(format!(
                "ask {} changed meanwhile (revision {} where {} was read)",
                rec.msg_id,
                now.map_or_else(|| "none".into(), |r| r.to_string()),
                seen.map_or_else(|| "none".into(), |r| r.to_string())
            ))
            .hint("look again: `circe asks --all`"));
        }
        let stored = AskRecord { rev: seen.map_or(1, |r| r + 1), ..rec.clone() };
        self.replace_file(&self.ask_path(&rec.msg_id), stored.render().as_bytes())?;
        Ok(stored)
    }

    /// The lock an answer to ask `id` holds while it is under way (`locks/answer-<id>.lock`,
    /// not the ask record's own lock, which each write takes).
    pub fn lock_answer(&self, id: &MsgId, wait: bool) -> Result<Option<super::lock::Lock>> {
        let path = self.root.join("locks").join(format!("answer-{id}.lock"));
        if wait {
            super::lock::Lock::acquire(&path, &format!("the answer to ask {id}")).map(Some)
        } else {
            super::lock::Lock::try_acquire(&path)
        }
    }

    /// The lock an import holds for its whole run (`locks/import.lock`), if free now.
    pub fn lock_import(&self) -> Result<Option<super::lock::Lock>> {
        super::lock::Lock::try_acquire(&self.root.join("locks").join("import.lock"))
    }

    /// The lock the filing of a question's copy holds (`locks/filing.lock`).
    pub fn lock_filing(&self) -> Result<super::lock::Lock> {
        let path = self.root.join("locks").join("filing.lock");
        super::lock::Lock::acquire(&path, "the filing of a question's copy")
    }

    /// The lock a send naming message id `id` holds (`locks/msgid-NN.lock`: one of 64, by
    /// a hash of the id, so lock files do not pile up; ids that share one wait in turn).
    pub fn lock_msg_id(&self, id: &str) -> Result<super::lock::Lock> {
        let n = id.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) % 64;
        let path = self.root.join("locks").join(format!("msgid-{n:02}.lock"));
        super::lock::Lock::acquire(&path, &format!("the sending of message id {id}"))
    }

    fn agent_dir(&self, agent: &AgentName) -> PathBuf {
        self.root.join("AGENTS").join(agent.as_str())
    }

    pub fn write_prompt(&self, agent: &AgentName, message: &[u8]) -> Result<()> {
        if !self.agent_dir(agent).is_dir() {
            return Err(Error::not_found(format!("no agent `{agent}`")));
        }
        self.check_agent(agent, "write the prompt of")?;
        self.replace_file(&self.agent_dir(agent).join("prompt.md"), message)
    }

    pub fn read_prompt(&self, agent: &AgentName) -> Result<Option<Vec<u8>>> {
        self.check_agent(agent, "read the prompt of")?;
        Self::read_optional(&self.agent_dir(agent).join("prompt.md"))
    }

    /// Mark an agent retired (`retired_at` in its agent.yaml). `false` when it was already.
    pub fn retire_agent(&self, agent: &AgentName, at: &str) -> Result<bool> {
        let _lock = self.lock_named("agents")?;
        self.check_agent(agent, "retire")?;
        let path = self.agent_dir(agent).join("agent.yaml");
        let Some(bytes) = Self::read_optional(&path)? else {
            return Err(Error::not_found(format!("no agent `{agent}`")));
        };
        let mut file = super::root::parse_agent_file(&bytes)
            .ok_or_else(|| Error::internal(format!("{} is damaged", path.display())))?;
        if file.retired_at.is_some() {
            return Ok(false);
        }
        file.retired_at = Some(at.to_string());
        let text = crate::yaml::to_string(&file)
            .map_err(|e| Error::internal(format!("cannot write agent.yaml: {e}")))?;
        self.replace_file(&path, text.as_bytes())?;
        Ok(true)
    }

    /// Write a damaged agent.yaml again (doctor's repair), unless it was mended meanwhile.
    pub(super) fn rewrite_agent(
        &self,
        agent: &AgentName,
        role: &str,
        retired_at: Option<&str>,
    ) -> Result<()> {
        let _lock = self.lock_named("agents")?;
        self.check_agent(agent, "write")?;
        let path = self.agent_dir(agent).join("agent.yaml");
        if Self::read_optional(&path)?.is_some_and(|b| super::root::parse_agent_file(&b).is_some())
        {
            return Ok(());
        }
        self.replace_file(&path, super::root::agent_yaml(role, retired_at).as_bytes())
    }

    /// Retired agents and when each was retired, sorted by name.
    pub fn retired_agents(&self) -> Result<Vec<(AgentName, String)>> {
        let dir = self.root.join("AGENTS");
        let mut out = Vec::new();
        for name in list_names(&dir)? {
            let Ok(agent) = AgentName::new(name) else { continue };
            let p = dir.join(agent.as_str()).join("agent.yaml");
            let at = atomic::read_regular(&p)
                .ok()
                .and_then(|b| super::root::parse_agent_file(&b))
                .and_then(|f| f.retired_at);
            if let Some(at) = at {
                out.push((agent, at));
            }
        }
        Ok(out)
    }
}
