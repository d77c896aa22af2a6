//! The chat channel in the database (PROTOCOLS.md sections 13 and 18): `chat` holds one row
//! per message said, `chat_head` the newest id and the channel's size. `chat_say` appends
//! in one statement (the head's row lock orders appends; a numbered line moves its sender's
//! counter in the same statement) and NOTIFYs the root's channel, which wakes watchers.

use std::time::{Duration, Instant};

use tokio_postgres::types::Type;

use super::{PgEngine, listen};
use crate::engine::{ChatArchived, ChatEntry, ChatLog, SeqHold, chat_cut, chat_free_name};
use crate::error::Result;
use crate::fault::test_break;

fn u64_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn entry(r: &tokio_postgres::Row) -> ChatEntry {
    ChatEntry {
        id: u64_of(r.get(0)),
        offset: u64_of(r.get(1)),
        line: u64_of(r.get(2)),
        text: r.get(3),
        archive: r.get(4),
    }
}

impl PgEngine {
    /// TEST BUILDS ONLY (`CIRCE_TEST_BREAK=pg-chat-race`): the head is read without its
    /// lock and written back after a pause, so two appends can take one id.
    fn chat_append_racing(&self, text: &str) -> Result<ChatEntry> {
        let head = self.rows(
            "reading the chat head",
            "SELECT last, bytes, lines FROM {s}.chat_head WHERE id = 1",
            &[],
            |r| Ok((r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, i64>(2))),
        )?;
        let (last, bytes, lines) = head.first().copied().unwrap_or_default();
        std::thread::sleep(Duration::from_millis(20));
        let id = last + 1;
        let n = i64::try_from(text.bytes().filter(|&b| b == b'\n').count()).unwrap_or(0);
        self.exec(
            "appending to the chat channel",
            "INSERT INTO {s}.chat (id, text, byte_offset, line) VALUES ($1, $2, $3, $4)",
            &[
                (&id, Type::INT8),
                (&text, Type::TEXT),
                (&bytes, Type::INT8),
                (&(lines + 1), Type::INT8),
            ],
        )?;
        let size = bytes + i64::try_from(text.len()).unwrap_or(0);
        self.exec(
            "moving the chat head",
            "UPDATE {s}.chat_head SET last = $1, bytes = $2, lines = $3",
            &[(&id, Type::INT8), (&size, Type::INT8), (&(lines + n), Type::INT8)],
        )?;
        Ok(ChatEntry {
            id: u64_of(id),
            offset: u64_of(bytes),
            line: u64_of(lines + 1),
            text: text.to_string(),
            archive: None,
        })
    }

    fn chat_channel(&self) -> Result<Vec<ChatEntry>> {
        self.rows(
            "reading the chat channel",
            "SELECT id, byte_offset, line, text, archive FROM {s}.chat
              WHERE archive IS NULL ORDER BY id",
            &[],
            |r| Ok(entry(r)),
        )
    }
}

impl ChatLog for PgEngine {
    fn chat_append(&self, text: &str, number: Option<&dyn SeqHold>) -> Result<ChatEntry> {
        if number.is_none() && test_break("pg-chat-race") {
            return self.chat_append_racing(text);
        }
        // The line's number: the hold on this connection for that sender and number.
        let m = match number {
            Some(h) => {
                let (agent, next) = (h.sender(), h.next());
                let m = self.held_move(|a| a.agent == *agent && a.next == next);
                Some(m.ok_or_else(|| {
                    crate::error::Error::internal("a chat line numbered by no hold on this root")
                })?)
            }
            None => None,
        };
        let agent = m.as_ref().map(|m| m.agent.as_str());
        let (epoch, last) = (m.as_ref().map(|m| m.epoch), m.as_ref().map(|m| m.last));
        let (from_epoch, from_last) = m.as_ref().and_then(|m| m.from).unzip();
        // The counter moves by compare-and-set (section 18, "sequence numbers") in the
        // statement that appends, and when it did not move nothing is appended: `chat_say`
        // is called without the counter, lateral to a row that exists only when it moved.
        let sql = format!(
            "WITH {},
             g AS (SELECT $1::text AS t WHERE $2::text IS NULL OR EXISTS (SELECT 1 FROM c))
             SELECT s.o_id, s.o_offset, s.o_line
               FROM g, LATERAL {{s}}.chat_say(g.t, NULL, NULL, NULL) AS s",
            super::seq::counter_cte(2)
        );
        let got = self.rows(
            "appending to the chat channel",
            &sql,
            &[
                (&text, Type::TEXT),
                (&agent, Type::TEXT),
                (&epoch, Type::INT8),
                (&last, Type::INT8),
                (&from_epoch, Type::INT8),
                (&from_last, Type::INT8),
            ],
            |r| {
                Ok(ChatEntry {
                    id: u64_of(r.get(0)),
                    offset: u64_of(r.get(1)),
                    line: u64_of(r.get(2)),
                    text: text.to_string(),
                    archive: None,
                })
            },
        )?;
        let Some(entry) = got.into_iter().next() else {
            return Err(match m {
                Some(m) => crate::seq::counter_moved(&m.agent),
                None => crate::error::Error::internal("chat_say returned no row"),
            });
        };
        if m.is_some() {
            self.number_used();
        }
        Ok(entry)
    }

    fn chat_read(&self, after: u64, max: usize) -> Result<Vec<ChatEntry>> {
        let (after, max) = (i64_of(after), i64::try_from(max).unwrap_or(i64::MAX));
        self.rows(
            "reading the chat channel",
            "SELECT id, byte_offset, line, text, archive FROM {s}.chat
              WHERE id > $1 ORDER BY id LIMIT $2",
            &[(&after, Type::INT8), (&max, Type::INT8)],
            |r| Ok(entry(r)),
        )
    }

    fn chat_last(&self) -> Result<u64> {
        let v = self.rows(
            "reading the chat head",
            "SELECT last FROM {s}.chat_head WHERE id = 1",
            &[],
            |r| Ok(u64_of(r.get(0))),
        )?;
        Ok(v.first().copied().unwrap_or(0))
    }

    fn chat_start(&self) -> Result<u64> {
        let v = self.rows(
            "reading the chat channel",
            "SELECT coalesce(max(id), 0) FROM {s}.chat WHERE archive IS NOT NULL",
            &[],
            |r| Ok(u64_of(r.get(0))),
        )?;
        Ok(v.first().copied().unwrap_or(0))
    }

    fn chat_wait(&self, after: u64, timeout: Duration) -> Result<u64> {
        let until = Instant::now() + timeout;
        let mut listener = self.listener.borrow_mut();
        if listener.is_none() {
            *listener = Some(listen::Listener::start(&self.target)?);
        }
        loop {
            // Read after listening: a line committed before the LISTEN is seen here.
            let last = self.chat_last()?;
            let now = Instant::now();
            if last > after || now >= until {
                return Ok(last);
            }
            // A notification lost with a broken connection costs at most one second; a
            // listener whose connection broke is made again.
            let slice = (until - now).min(Duration::from_secs(1));
            listen::Listener::wait_in(&mut listener, &self.target, slice);
        }
    }

    fn chat_archive(
        &self,
        stem: &str,
        split: &dyn Fn(&[u8]) -> Result<usize>,
    ) -> Result<Option<ChatArchived>> {
        self.no_open_tx()?;
        let c = &self.conn.client;
        self.conn.call(
            "starting the archive",
            c.batch_execute(&self.sql(
                "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '10s';
                 SELECT 1 FROM {s}.chat_head WHERE id = 1 FOR UPDATE",
            )),
        )?;
        let done = (|| {
            let live = self.chat_channel()?;
            let text: String = live.iter().map(|e| e.text.as_str()).collect();
            let at = split(text.as_bytes())?;
            if at == 0 {
                return Ok(None);
            }
            let (n, lines) = chat_cut(&live, at)?;
            let taken = |name: &str| {
                let hit = self.rows(
                    "naming the archive",
                    "SELECT 1 FROM {s}.chat WHERE archive = $1 LIMIT 1",
                    &[(&name, Type::TEXT)],
                    |_| Ok(()),
                )?;
                Ok(!hit.is_empty())
            };
            let name = chat_free_name(stem, &taken)?;
            let upto = i64_of(live[n - 1].id);
            let (bytes, lines_i) = (i64::try_from(at).unwrap_or(i64::MAX), i64_of(lines));
            self.exec(
                "archiving the chat channel",
                "UPDATE {s}.chat SET archive = $1 WHERE archive IS NULL AND id <= $2",
                &[(&name, Type::TEXT), (&upto, Type::INT8)],
            )?;
            self.exec(
                "archiving the chat channel",
                "UPDATE {s}.chat SET byte_offset = byte_offset - $1, line = line - $2
                  WHERE archive IS NULL",
                &[(&bytes, Type::INT8), (&lines_i, Type::INT8)],
            )?;
            self.exec(
                "archiving the chat channel",
                "UPDATE {s}.chat_head SET bytes = bytes - $1, lines = lines - $2 WHERE id = 1",
                &[(&bytes, Type::INT8), (&lines_i, Type::INT8)],
            )?;
            Ok(Some(ChatArchived { name, bytes: at as u64, lines }))
        })();
        match done {
            Ok(v) => {
                self.conn.call("committing the archive", c.batch_execute("COMMIT"))?;
                Ok(v)
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }
}
