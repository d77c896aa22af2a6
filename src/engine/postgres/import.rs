//! Moving a whole root into and out of a database (`circe migrate`).
//!
//! `import` loads a `Snapshot` into an empty schema in one transaction: the tables are made
//! if missing, and every agent, message, task and event goes in with one statement per
//! table, or nothing does. `export` reads the root under a lock that stops every writer,
//! hands the snapshot to the caller (which writes the local root), and marks the schema
//! `moved_to` in the same transaction, so no command writes to the old root afterwards:
//! a command that opened the root before reads no mark, so every table also gets a
//! trigger (`REFUSE_MOVED`) that refuses every write; a write that waited on the export's locks
//! runs it once they are let go, and writes nothing.

use tokio_postgres::types::Type;

use super::PgEngine;
use super::conn::Conn;
use super::schema::{self, Clock};
use super::target::Target;
use crate::engine::Snapshot;
use crate::error::{Error, Result};

/// Refuses every write to a root that moved (`export`), whoever opened it before: the
/// function of a trigger `export` puts on every table but `meta`, run by each statement that
/// writes, after the locks it waited for were let go. The error says where the root went
/// (`conn::db_error`, kind `moved`).
const REFUSE_MOVED: &str =
    "CREATE OR REPLACE FUNCTION {s}.refuse_moved() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  RAISE EXCEPTION 'circe:moved:the root was moved to % while this command ran; it wrote nothing',
    (SELECT value FROM {s}.meta WHERE key = 'moved_to');
END $f$";

/// A connection to the database a root is to move into, made before the root folder is set
/// aside (`circe migrate`): a database that cannot be reached (no answer within
/// `connect_timeout`) leaves the root where it was, in use the whole time.
pub struct Destination(Conn);

/// Connect to the database at `target` for an `import`.
pub fn connect_for_import(target: &Target) -> Result<Destination> {
    Ok(Destination(Conn::connect(target)?))
}

/// Load `snap` into the (empty or missing) root at `target`, through `to` (connected to
/// it). Returns the number of tasks, messages and events imported.
pub fn import(
    to: Destination,
    target: &Target,
    snap: &Snapshot,
    clock: Clock,
    given: bool,
) -> Result<(usize, usize, usize)> {
    chat_without_nul(snap)?;
    let Destination(conn) = to;
    // The tables first (their own transaction; idempotent), then the data in one. A clock
    // given that is not that of a root already there is refused, nothing changed.
    schema::init(&conn, &target.schema, &snap.config, clock, given)?;
    // A long load: the role's idle-in-transaction limit (the client between statements)
    // does not end it.
    let begin =
        "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL idle_in_transaction_session_timeout = 0";
    conn.call("starting the import", conn.client.batch_execute(begin))?;
    let done = load(&conn, target, snap);
    match done {
        Ok(()) => {
            conn.call("committing the import", conn.client.batch_execute("COMMIT"))?;
            // Fresh statistics, so claim --next plans on the index from the first claim.
            let analyze =
                schema::sql(&target.schema, "ANALYZE {s}.tasks, {s}.messages, {s}.events");
            conn.call("analyzing the tables", conn.client.batch_execute(&analyze))?;
            Ok((snap.tasks.len(), snap.message_count(), snap.events.len()))
        }
        Err(e) => {
            let _ = conn.run(conn.client.batch_execute("ROLLBACK"));
            Err(e)
        }
    }
}

/// The whole snapshot into the empty root, inside the caller's transaction.
fn load(conn: &Conn, target: &Target, snap: &Snapshot) -> Result<()> {
    let sql = |t: &str| schema::sql(&target.schema, t);
    let counts = conn.call(
        "checking the target is empty",
        conn.client.query_typed_one(
            // Anything a team's work leaves (a schema `circe init` made holds only its
            // configuration and agents, which the folder's take the place of).
            &sql("SELECT (SELECT count(*) FROM {s}.tasks) + (SELECT count(*) FROM {s}.messages)
                         + (SELECT count(*) FROM {s}.events) + (SELECT count(*) FROM {s}.asks)
                         + (SELECT count(*) FROM {s}.cursors) + (SELECT count(*) FROM {s}.dead_letters)
                         + (SELECT count(*) FROM {s}.seq_counters) + (SELECT count(*) FROM {s}.seq_seen)
                         + (SELECT count(*) FROM {s}.chat) + (SELECT count(*) FROM {s}.grants)
                         + (SELECT count(*) FROM {s}.tombstones)"),
            &[],
        ),
    )?;
    if counts.get::<_, i64>(0) > 0 {
        return Err(Error::refused(format!(
            "the root {} holds a team's work already (tasks, messages, events, asks, cursors, numbered sends or chat lines); nothing was moved",
            target.location()
        ))
        .hint("migrate into a new schema (?schema=NAME)"));
    }
    conn.call(
        "writing the configuration",
        conn.client
            .execute_typed(&sql("UPDATE {s}.config SET text = $1"), &[(&snap.config, Type::TEXT)]),
    )?;
    let (names, roles): (Vec<String>, Vec<String>) =
        snap.agents.iter().map(|(a, r)| (a.to_string(), r.clone())).unzip();
    conn.call(
        "importing the agents",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.agents (name, role) SELECT * FROM unnest($1::text[], $2::text[])
                  ON CONFLICT (name) DO UPDATE SET role = excluded.role"),
            &[(&names, Type::TEXT_ARRAY), (&roles, Type::TEXT_ARRAY)],
        ),
    )?;
    let (mut boxes, mut files, mut bodies) = (Vec::new(), Vec::new(), Vec::new());
    for (b, msgs) in &snap.boxes {
        for (f, body) in msgs {
            boxes.push(b.label());
            files.push(f.clone());
            bodies.push(body.clone());
        }
    }
    let ids: Vec<Option<String>> = bodies.iter().map(|b| super::msg_id_of(b)).collect();
    conn.call(
        "importing the messages",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.messages (box, file, body, msg_id)
                  SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[])"),
            &[
                (&boxes, Type::TEXT_ARRAY),
                (&files, Type::TEXT_ARRAY),
                (&bodies, Type::BYTEA_ARRAY),
                (&ids, Type::TEXT_ARRAY),
            ],
        ),
    )?;
    load_tasks_and_events(conn, target, snap)
}

fn load_tasks_and_events(conn: &Conn, target: &Target, snap: &Snapshot) -> Result<()> {
    let sql = |t: &str| schema::sql(&target.schema, t);
    let rows: Vec<serde_json::Value> = snap.tasks.iter().map(task_json).collect::<Result<_>>()?;
    let rows = serde_json::Value::Array(rows).to_string();
    conn.call(
        "importing the tasks",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.tasks (task_id, v, status, owner, started_at, updated_at,
                    created_at, intent, priority, \"to\", opened_by, epoch, attempts, expiries,
                    message, lease_expires_at, note, handoff, handoff_checks, checks,
                    claimed_at, host, pid, ticket, rev, lease_until, deadline, deadline_at, asserted)
                  SELECT task_id, coalesce(v, 1), status, owner, started_at, updated_at,
                    created_at, intent, priority, \"to\", opened_by, epoch, attempts,
                    coalesce(expiries, 0), message, lease_expires_at, note, handoff,
                    coalesce(handoff_checks, '[]'), coalesce(checks, '{}'), claimed_at, host,
                    pid, ticket, 1, lease_expires_at::timestamptz, deadline,
                    deadline::timestamptz, coalesce(asserted, '[]')
                  FROM jsonb_populate_recordset(null::{s}.tasks, $1::text::jsonb)"),
            &[(&rows, Type::TEXT)],
        ),
    )?;
    let eids: Vec<i64> = snap.events.iter().map(|e| i64::try_from(e.id).unwrap_or(0)).collect();
    let etasks: Vec<Option<String>> =
        snap.events.iter().map(|e| e.task.as_ref().map(ToString::to_string)).collect();
    let lines: Vec<String> =
        snap.events.iter().map(|e| crate::event::Event { id: 0, ..e.clone() }.to_line()).collect();
    // Ids go on after the newest ever given (the archive may hold newer than the log).
    let given = i64::try_from(snap.last_event_id).unwrap_or(i64::MAX);
    let last = eids.iter().copied().max().unwrap_or(0).max(given);
    conn.call(
        "importing the events",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.events (id, task, line)
                  SELECT * FROM unnest($1::int8[], $2::text[], $3::text[])"),
            &[(&eids, Type::INT8_ARRAY), (&etasks, Type::TEXT_ARRAY), (&lines, Type::TEXT_ARRAY)],
        ),
    )?;
    // Ids up to `last` are history as the folder held it (the archive may have taken some);
    // doctor checks that those this engine gives after it have no gap.
    conn.call(
        "setting the feed",
        conn.client.execute_typed(
            &sql("WITH f AS (UPDATE {s}.feed SET last = $1)
                  INSERT INTO {s}.meta VALUES ('imported_last', $1::text)
                  ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
            &[(&last, Type::INT8)],
        ),
    )?;
    load_sequence(conn, target, snap)
}

/// Every sender's counter and every receiver's lastSeen (section 14): numbering goes on.
fn load_sequence(conn: &Conn, target: &Target, snap: &Snapshot) -> Result<()> {
    let sql = |t: &str| schema::sql(&target.schema, t);
    let agents: Vec<String> = snap.counters.iter().map(|(a, _)| a.to_string()).collect();
    let epochs: Vec<i64> =
        snap.counters.iter().map(|(_, c)| i64::try_from(c.epoch).unwrap_or(i64::MAX)).collect();
    let lasts: Vec<i64> =
        snap.counters.iter().map(|(_, c)| i64::try_from(c.last).unwrap_or(i64::MAX)).collect();
    conn.call(
        "importing the sequence counters",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.seq_counters (agent, epoch, last)
                  SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[])"),
            &[(&agents, Type::TEXT_ARRAY), (&epochs, Type::INT8_ARRAY), (&lasts, Type::INT8_ARRAY)],
        ),
    )?;
    let receivers: Vec<String> = snap.receivers.iter().map(|(a, _)| a.to_string()).collect();
    let states: Vec<String> =
        snap.receivers.iter().map(|(_, r)| serde_json::to_string(r).unwrap_or_default()).collect();
    conn.call(
        "importing what each agent has seen",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.seq_seen (agent, state)
                  SELECT * FROM unnest($1::text[], $2::text[])"),
            &[(&receivers, Type::TEXT_ARRAY), (&states, Type::TEXT_ARRAY)],
        ),
    )?;
    load_tx(conn, target, snap)
}

/// What TX adds (section 16): ask records, current prompts, retirements.
fn load_tx(conn: &Conn, target: &Target, snap: &Snapshot) -> Result<()> {
    let sql = |t: &str| schema::sql(&target.schema, t);
    let ids: Vec<String> = snap.asks.iter().map(|a| a.msg_id.to_string()).collect();
    let revs: Vec<i64> =
        snap.asks.iter().map(|a| i64::try_from(a.rev).unwrap_or(i64::MAX)).collect();
    let records: Vec<String> = snap
        .asks
        .iter()
        .map(|a| {
            serde_json::to_string(a).map_err(|e| Error::internal(format!("ask {}: {e}", a.msg_id)))
        })
        .collect::<Result<_>>()?;
    conn.call(
        "importing the asks",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.asks (msg_id, rev, record)
                  SELECT * FROM unnest($1::text[], $2::int8[], $3::text[])"),
            &[(&ids, Type::TEXT_ARRAY), (&revs, Type::INT8_ARRAY), (&records, Type::TEXT_ARRAY)],
        ),
    )?;
    let (agents, prompts): (Vec<String>, Vec<Vec<u8>>) =
        snap.prompts.iter().map(|(a, p)| (a.to_string(), p.clone())).unzip();
    conn.call(
        "importing the prompts",
        conn.client.execute_typed(
            &sql("UPDATE {s}.agents a SET prompt = x.p
                  FROM unnest($1::text[], $2::bytea[]) AS x(n, p) WHERE a.name = x.n"),
            &[(&agents, Type::TEXT_ARRAY), (&prompts, Type::BYTEA_ARRAY)],
        ),
    )?;
    let (agents, at): (Vec<String>, Vec<String>) =
        snap.retired.iter().map(|(a, t)| (a.to_string(), t.clone())).unzip();
    conn.call(
        "importing the retirements",
        conn.client.execute_typed(
            &sql("UPDATE {s}.agents a SET retired_at = x.t
                  FROM unnest($1::text[], $2::text[]) AS x(n, t) WHERE a.name = x.n"),
            &[(&agents, Type::TEXT_ARRAY), (&at, Type::TEXT_ARRAY)],
        ),
    )?;
    load_cursors(conn, target, snap)?;
    load_tombstones(conn, target, snap)?;
    load_chat(conn, target, snap)
}

/// The tombstones of the tasks the folder archived (the archive stays in the folder; the
/// ids come along, so none is opened again), and `meta.tombstones`, which tells an opening
/// root to ask them.
fn load_tombstones(conn: &Conn, target: &Target, snap: &Snapshot) -> Result<()> {
    if snap.tombstones.is_empty() {
        return Ok(());
    }
    let sql = |t: &str| schema::sql(&target.schema, t);
    let mut ids = Vec::with_capacity(snap.tombstones.len());
    let mut texts = Vec::with_capacity(snap.tombstones.len());
    for t in &snap.tombstones {
        ids.push(t.task.to_string());
        texts.push(t.to_text());
    }
    let n = i64::try_from(ids.len()).unwrap_or(i64::MAX);
    conn.call(
        "importing the archived tasks' tombstones",
        conn.client.execute_typed(
            &sql("WITH t AS (INSERT INTO {s}.tombstones (task_id, tombstone)
                             SELECT * FROM unnest($1::text[], $2::text[]))
                  INSERT INTO {s}.meta VALUES ('tombstones', $3::text)
                  ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
            &[(&ids, Type::TEXT_ARRAY), (&texts, Type::TEXT_ARRAY), (&n, Type::INT8)],
        ),
    )?;
    Ok(())
}

/// Every event consumer's saved place, and the events its hook set aside (in order).
fn load_cursors(conn: &Conn, target: &Target, snap: &Snapshot) -> Result<()> {
    let sql = |t: &str| schema::sql(&target.schema, t);
    let (names, values): (Vec<String>, Vec<Vec<u8>>) =
        snap.cursors.iter().map(|(n, v)| (n.to_string(), v.clone())).unzip();
    conn.call(
        "importing the consumers' cursors",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.cursors (kind, name, value)
                  SELECT 'events', n, v FROM unnest($1::text[], $2::bytea[]) AS x(n, v)"),
            &[(&names, Type::TEXT_ARRAY), (&values, Type::BYTEA_ARRAY)],
        ),
    )?;
    let (consumers, lines): (Vec<String>, Vec<String>) = snap
        .dead_letters
        .iter()
        .flat_map(|(n, evs)| evs.iter().map(move |e| (n.to_string(), e.to_line())))
        .unzip();
    conn.call(
        "importing the dead letters",
        conn.client.execute_typed(
            &sql("INSERT INTO {s}.dead_letters (consumer, line)
                  SELECT c, l FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(c, l, o)
                  ORDER BY o"),
            &[(&consumers, Type::TEXT_ARRAY), (&lines, Type::TEXT_ARRAY)],
        ),
    )?;
    Ok(())
}

/// A NUL byte in the chat channel or an archive of it (written by hand: `chat say` refuses
/// one) is no text to a database: said with its file and line before anything is sent.
fn chat_without_nul(snap: &Snapshot) -> Result<()> {
    let Some(chat) = &snap.chat else { return Ok(()) };
    let files = chat.archives.iter().map(|(n, t)| (Some(n.as_str()), t.as_slice()));
    for (archive, data) in files.chain(std::iter::once((None, chat.channel.as_slice()))) {
        let Some(at) = data.iter().position(|&b| b == 0) else { continue };
        let line = data[..at].split(|&b| b == b'\n').count();
        let file = archive.map_or_else(|| "chat.md".to_string(), |a| format!("LOGS/chat/{a}"));
        return Err(Error::refused(format!(
            "{file} line {line} holds a NUL byte, which a database keeps in no text"
        ))
        .hint(
            "take it out of that line (an editor, or `tr -d '\\000'` on a copy), then migrate again: nothing was moved",
        ));
    }
    Ok(())
}

/// The chat channel and its archives (archives first, oldest first): one entry per message
/// or other line (`chat_entries_of`), each with its place in its file.
fn load_chat(conn: &Conn, target: &Target, snap: &Snapshot) -> Result<()> {
    let Some(chat) = &snap.chat else { return Ok(()) };
    let files = chat.archives.iter().map(|(n, t)| (Some(n.as_str()), t.as_slice()));
    let files = files.chain(std::iter::once((None, chat.channel.as_slice())));
    let (mut texts, mut offsets, mut lines, mut archives) = (vec![], vec![], vec![], vec![]);
    let (mut bytes, mut line) = (0i64, 1i64);
    for (archive, data) in files {
        (bytes, line) = (0, 1);
        for e in crate::engine::chat_entries_of(data) {
            let n = i64::try_from(e.bytes().filter(|&b| b == b'\n').count()).unwrap_or(0);
            offsets.push(bytes);
            lines.push(line);
            bytes += i64::try_from(e.len()).unwrap_or(0);
            line += n;
            texts.push(e);
            archives.push(archive.map(str::to_string));
        }
    }
    let last = i64::try_from(texts.len()).unwrap_or(i64::MAX);
    conn.call(
        "importing the chat channel",
        conn.client.execute_typed(
            &schema::sql(
                &target.schema,
                "WITH h AS (UPDATE {s}.chat_head SET last = $5, bytes = $6, lines = $7 WHERE id = 1)
                 INSERT INTO {s}.chat (id, text, byte_offset, line, archive)
                 SELECT o, t, b, l, a
                   FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[])
                        WITH ORDINALITY AS x(t, b, l, a, o)",
            ),
            &[
                (&texts, Type::TEXT_ARRAY),
                (&offsets, Type::INT8_ARRAY),
                (&lines, Type::INT8_ARRAY),
                (&archives, Type::TEXT_ARRAY),
                (&last, Type::INT8),
                (&bytes, Type::INT8),
                (&(line - 1), Type::INT8),
            ],
        ),
    )?;
    Ok(())
}

/// A task as a row of the tasks table (JSON with the column names).
fn task_json(st: &crate::task::TaskState) -> Result<serde_json::Value> {
    if !st.rec.outbox.is_empty() {
        return Err(Error::refused(format!(
            "task {}: its record holds messages not yet delivered (an outbox)",
            st.rec.task_id
        ))
        .hint("run `circe doctor --repair` on the local root first"));
    }
    let mut v = serde_json::to_value(&st.rec)
        .map_err(|e| Error::internal(format!("task {}: {e}", st.rec.task_id)))?;
    let o = v.as_object_mut().ok_or_else(|| Error::internal("a record is not an object"))?;
    o.insert("checks".into(), serde_json::to_value(&st.checks).unwrap_or_default());
    if let Some(owner) = &st.owner {
        o.insert("claimed_at".into(), owner.claimed_at.clone().into());
        o.insert("host".into(), owner.host.clone().into());
        o.insert("pid".into(), owner.pid.into());
    }
    let ticket = st.location.as_ref().map(crate::boxes::Mailbox::label).ok_or_else(|| {
        Error::refused(format!("task {}: its message is in no box", st.rec.task_id))
            .hint("run `circe doctor --repair` on the local root first")
    })?;
    o.insert("ticket".into(), ticket.into());
    Ok(v)
}

impl PgEngine {
    /// Read the whole root with every writer stopped, give it to `write`, and mark the root
    /// moved to `to` in the same transaction (when `write` fails, nothing is marked).
    pub fn export(
        &self,
        to: &str,
        write: &mut dyn FnMut(&Snapshot) -> Result<()>,
    ) -> Result<Snapshot> {
        let c = &self.conn.client;
        // Every table a command writes (all but `meta`), read before the transaction: a
        // query inside it would fix its snapshot before the locks are granted. Locked in the
        // order commands first take them (a task's row, then the messages, the journal of a
        // send's events before the events, ...), so that the move waits for a command
        // rather than the two waiting on each other.
        let tables: Vec<String> = self
            .conn
            .call(
                "listing the root's tables",
                c.query(
                    "SELECT tablename::text FROM pg_tables WHERE schemaname = $1 AND tablename <> 'meta'
                     ORDER BY array_position(ARRAY['tasks', 'messages', 'event_journals', 'events',
                       'agents', 'config', 'seq_counters', 'seq_seen', 'asks', 'chat', 'chat_head',
                       'cursors', 'feed', 'grants'], tablename::text), tablename",
                    &[&self.target.schema],
                ),
            )?
            .iter()
            .map(|r| format!("{{s}}.\"{}\"", r.get::<_, String>(0).replace('"', "\"\"")))
            .collect();
        let lock = self.sql(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ;
             SET LOCAL lock_timeout = '10s';
             SET LOCAL idle_in_transaction_session_timeout = 0;
             LOCK TABLE {} IN EXCLUSIVE MODE",
            tables.join(", ")
        ));
        self.conn.call("stopping the writers", c.batch_execute(&lock))?;
        let done = (|| -> Result<Snapshot> {
            // Fenced under the locks, before anything is written: it waits for no one, and
            // goes with the transaction when the move fails.
            // TEST BUILDS ONLY (CIRCE_TEST_BREAK=migrate-unfenced): the mark alone.
            if !crate::fault::test_break("migrate-unfenced") {
                let fence: String = tables
                    .iter()
                    .map(|t| {
                        format!(
                    "CREATE TRIGGER circe_moved BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON {t}
                     FOR EACH STATEMENT EXECUTE FUNCTION {{s}}.refuse_moved();"
                )
                    })
                    .collect();
                let fence = self.sql(&format!("{REFUSE_MOVED}; {fence}"));
                self.conn.call("fencing the old root", c.batch_execute(&fence))?;
            }
            let snap = Snapshot::read(self)?;
            write(&snap)?;
            self.exec(
                "marking the root moved",
                "INSERT INTO {s}.meta VALUES ('moved_to', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[(&to, Type::TEXT)],
            )?;
            Ok(snap)
        })();
        match done {
            Ok(snap) => {
                self.conn.call("committing the export", c.batch_execute("COMMIT"))?;
                Ok(snap)
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }
}
