//! What TX adds to a root (PROTOCOLS.md section 16), in the database: ask records in
//! `asks` (compare-and-set on `rev` in one statement), each agent's current prompt and
//! retirement in its `agents` row.

use tokio_postgres::types::Type;

use super::PgEngine;
use super::prefetch::Prefetched;
use crate::engine::Held;
use crate::error::{Error, Result};
use crate::names::{AgentName, MsgId};
use crate::tx::AskRecord;

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn parse_ask(json: &str) -> Result<AskRecord> {
    let rec: AskRecord = serde_json::from_str(json)
        .map_err(|e| Error::internal(format!("an ask row does not read as a record: {e}")))?;
    if rec.v > crate::tx::ASK_FORMAT {
        return Err(Error::refused(format!(
            "ask {} is of record format {}; this circe reads up to {}",
            rec.msg_id,
            rec.v,
            crate::tx::ASK_FORMAT
        ))
        .hint("upgrade circe"));
    }
    Ok(rec)
}

/// An answer (`ask/<id>`) or a send of a message id (`send/<id>`) under way: an advisory
/// lock held by the connection, released when dropped (or when the connection ends).
struct KeyLock<'a> {
    eng: &'a PgEngine,
    key: String,
}

impl Drop for KeyLock<'_> {
    fn drop(&mut self) {
        let _ = self.eng.session_unlock("letting go of a lock", &self.key);
    }
}

impl PgEngine {
    /// `Engine::hold_ask`: the advisory lock, polled for at most 10 s when waiting.
    pub(super) fn lock_ask(&self, id: &MsgId, wait: bool) -> Result<Option<Held<'_>>> {
        self.lock_key(format!("ask/{id}"), &format!("holding ask {id}"), wait, || {
            Error::conflict(format!("an answer to ask {id} has been under way for over 10s"))
                .hint("a circe process may be stopped while answering; resume or kill it and retry")
        })
    }

    /// `Engine::hold_msg_id`: one send of message id `id` at a time.
    pub(super) fn lock_msg_id(&self, id: &str) -> Result<Held<'_>> {
        let what = format!("holding message id {id}");
        let held = self.lock_key(format!("send/{id}"), &what, true, || {
            Error::conflict(format!("a send of message id {id} has been under way for over 10s"))
                .hint("a circe process may be stopped while sending; resume or kill it and retry")
        })?;
        held.ok_or_else(|| Error::internal("a held send came back empty"))
    }

    /// The session lock `key`, polled for at most 10 s when waiting (then `late`'s error).
    pub(super) fn lock_key(
        &self,
        key: String,
        what: &str,
        wait: bool,
        late: impl Fn() -> Error,
    ) -> Result<Option<Held<'_>>> {
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            if self.try_session_lock(what, &key)? {
                return Ok(Some(Box::new(KeyLock { eng: self, key })));
            }
            if !wait {
                return Ok(None);
            }
            if start.elapsed() > std::time::Duration::from_secs(10) {
                return Err(self.held_too_long(&key, late()));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(20));
        }
    }

    pub(super) fn read_ask(&self, id: &MsgId) -> Result<Option<AskRecord>> {
        let i = id.as_str();
        let mut v = self.rows(
            &format!("reading ask {id}"),
            "SELECT record FROM {s}.asks WHERE msg_id = $1",
            &[(&i, Type::TEXT)],
            |r| parse_ask(&r.get::<_, String>(0)),
        )?;
        Ok(v.pop())
    }

    pub(super) fn list_asks(&self) -> Result<Vec<AskRecord>> {
        self.rows("reading the asks", "SELECT record FROM {s}.asks ORDER BY msg_id", &[], |r| {
            parse_ask(&r.get::<_, String>(0))
        })
    }

    /// One statement: insert when `seen` is `None` (and there is none), else update the row
    /// still at revision `seen`. No row written: someone else wrote first.
    pub(super) fn write_ask(&self, rec: &AskRecord, seen: Option<u64>) -> Result<AskRecord> {
        let stored = AskRecord { rev: seen.map_or(1, |r| r + 1), ..rec.clone() };
        let json = serde_json::to_string(&stored)
            .map_err(|e| Error::internal(format!("ask {}: {e}", rec.msg_id)))?;
        let (id, rev) = (rec.msg_id.as_str(), i64_of(stored.rev));
        let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 3] =
            [(&id, Type::TEXT), (&rev, Type::INT8), (&json, Type::TEXT)];
        let q = match seen {
            None => {
                "INSERT INTO {s}.asks (msg_id, rev, record) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING"
            }
            // TEST BUILDS ONLY (CIRCE_TEST_BREAK=pg-ask-nocas): no revision compared.
            Some(_) if crate::fault::test_break("pg-ask-nocas") => {
                "UPDATE {s}.asks SET rev = $2, record = $3 WHERE msg_id = $1"
            }
            Some(_) => {
                "UPDATE {s}.asks SET rev = $2, record = $3 WHERE msg_id = $1 AND rev = $2 - 1"
            }
        };
        if self.exec(&format!("writing ask {id}"), q, &params)? == 1 {
            return Ok(stored);
        }
        let now = self.read_ask(&rec.msg_id)?.map(|r| r.rev);
        Err(Error::conflict(format!(
            "ask {} changed meanwhile (revision {} where {} was read)",
            rec.msg_id,
            now.map_or_else(|| "none".into(), |r| r.to_string()),
            seen.map_or_else(|| "none".into(), |r| r.to_string())
        ))
        .hint("look again: `circe asks --all`"))
    }

    pub(super) fn write_prompt(&self, agent: &AgentName, message: &[u8]) -> Result<()> {
        let a = agent.as_str();
        let n = self.exec(
            &format!("storing the prompt of {agent}"),
            "UPDATE {s}.agents SET prompt = $2 WHERE name = $1",
            &[(&a, Type::TEXT), (&message, Type::BYTEA)],
        )?;
        if n == 0 {
            return Err(Error::not_found(format!("no agent `{agent}`")));
        }
        Ok(())
    }

    pub(super) fn read_prompt(&self, agent: &AgentName) -> Result<Option<Vec<u8>>> {
        let a = agent.as_str();
        let v = self.rows(
            &format!("reading the prompt of {agent}"),
            "SELECT prompt FROM {s}.agents WHERE name = $1",
            &[(&a, Type::TEXT)],
            |r| Ok(r.get::<_, Option<Vec<u8>>>(0)),
        )?;
        Ok(v.into_iter().next().flatten())
    }

    /// One statement: mark the agent retired unless it is; tell which it was.
    pub(super) fn mark_retired(&self, agent: &AgentName, at: &str) -> Result<bool> {
        self.retired_at_open.take();
        let a = agent.as_str();
        let v = self.rows(
            &format!("retiring {agent}"),
            "WITH u AS (UPDATE {s}.agents SET retired_at = $2
                         WHERE name = $1 AND retired_at IS NULL RETURNING 1)
             SELECT EXISTS (SELECT 1 FROM {s}.agents WHERE name = $1), EXISTS (SELECT 1 FROM u)",
            &[(&a, Type::TEXT), (&at, Type::TEXT)],
            |r| Ok((r.get::<_, bool>(0), r.get::<_, bool>(1))),
        )?;
        match v.first() {
            Some((true, retired)) => Ok(*retired),
            _ => Err(Error::not_found(format!("no agent `{agent}`"))),
        }
    }

    pub(super) fn list_retired(&self) -> Result<Vec<(AgentName, String)>> {
        if let Some(read) = self.retired_at_open.take().and_then(Prefetched::fresh) {
            return Ok(read);
        }
        let rows = self.rows("reading the retired agents", RETIRED, &[], |r| Ok(retired_row(r)))?;
        Ok(rows.into_iter().flatten().collect())
    }
}

/// The retired agents, by name.
const RETIRED: &str =
    "SELECT name, retired_at FROM {s}.agents WHERE retired_at IS NOT NULL ORDER BY name";

/// One row of `RETIRED`; a name that is no agent name (a hand-edited table) is passed over,
/// as the opening and the local engine pass it over.
fn retired_row(r: &tokio_postgres::Row) -> Option<(AgentName, String)> {
    AgentName::new(r.get::<_, String>(0)).ok().map(|name| (name, r.get::<_, String>(1)))
}
