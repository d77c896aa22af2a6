//! The event log of the database engine: appending (ids from the one-row `feed` counter,
//! in the committing transaction), reading by cursor in either direction, and waiting for
//! the next event (LISTEN/NOTIFY through `listen.rs`, or a timer with `--poll`).

use crate::names::TaskId;
use std::time::Duration;

use tokio_postgres::types::Type;

use super::schema::Clock;
use super::{PgEngine, listen};
use crate::engine::EventFeed;
use crate::error::Result;
use crate::event::{self, Cursor, Event, Line};
use crate::fault::test_break;

/// Stands for the time an event is appended, in lines sent to the server.
const NOW: &str = "@circe:now@";

/// The server's `now()` as the event log writes a time (`clock::stamp_ms`).
const STAMP: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#;

/// Woken by LISTEN/NOTIFY (through `wait_feed`), or on a timer with `--poll`.
struct PgFeed<'a> {
    eng: &'a PgEngine,
    seen: u64,
    poll: Option<Duration>,
}

impl EventFeed for PgFeed<'_> {
    fn wait(&mut self, timeout: Option<Duration>) -> Result<bool> {
        // `None`: no limit; the listener is asked in slices of an hour.
        let limit = timeout.unwrap_or(Duration::from_secs(3600));
        if let Some(every) = self.poll {
            std::thread::sleep(every.min(limit));
            let last = self.eng.feed_last()?;
            let woke = last > self.seen;
            self.seen = last;
            return Ok(woke || every <= limit);
        }
        let last = self.eng.wait_feed(self.seen, limit)?;
        let woke = last > self.seen;
        self.seen = last;
        Ok(woke)
    }
}

impl PgEngine {
    /// `Engine::append_events`: the events with the next ids, in one statement. On a root
    /// whose clock is the server's, the events are stamped with the server's time as they
    /// are appended (an agent on a host whose clock is off logs them at the root's time,
    /// as its task changes are: PROTOCOLS.md section 18).
    pub(super) fn append_lines(&self, mut events: Vec<Event>) -> Result<Vec<Event>> {
        if events.is_empty() {
            return Ok(events);
        }
        // TEST BUILDS ONLY (CIRCE_TEST_BREAK=pg-client-clock): the client's time, the
        // broken variant.
        let server = self.clock == Clock::Server && !test_break("pg-client-clock");
        if server {
            for e in &mut events {
                e.ts = NOW.to_string();
            }
        }
        let lines: Vec<String> = events.iter().map(Event::to_line).collect();
        let task: Option<String> =
            events.first().and_then(|e| e.task.as_ref()).map(ToString::to_string);
        // The events of a journal kept on this connection: appended only by the statement
        // that deletes its row (a settler that took the row first logged them).
        let journal = self.journal_to_log();
        let (from, only) = match journal {
            Some(_) => {
                ("WITH d AS (DELETE FROM {s}.event_journals WHERE key = $3 RETURNING 1)", ", d")
            }
            None => ("", "WHERE $3::text IS NULL"),
        };
        // The stamp takes the place of the placeholder "@circe:now@" (`NOW`).
        let q = format!(
            "{from} SELECT {{s}}.append_events($1,
                 array(SELECT replace(l, '\"{NOW}\"', to_json(t.ts)::text)
                       FROM unnest($2::text[]) WITH ORDINALITY AS u(l, n) ORDER BY n), NULL),
                 t.ts
             FROM (SELECT to_char(now() AT TIME ZONE 'UTC', {STAMP}) AS ts) t {only}"
        );
        let first = self.rows(
            "appending events",
            &q,
            &[(&task, Type::TEXT), (&lines, Type::TEXT_ARRAY), (&journal, Type::TEXT)],
            |r| Ok((r.get::<_, i64>(0), r.get::<_, String>(1))),
        )?;
        if let Some(key) = &journal {
            self.journal.borrow_mut().take_if(|p| &p.row == key);
        }
        // No row: a settler took the journal first and logged the events.
        let Some((first, ts)) = first.into_iter().next() else { return Ok(events) };
        let first = u64::try_from(first).unwrap_or(0);
        for (i, e) in events.iter_mut().enumerate() {
            e.id = first + i as u64;
            if server {
                e.ts.clone_from(&ts);
            }
        }
        Ok(events)
    }

    /// `Engine::read_events`: up to `max` events after the cursor, oldest first.
    pub(super) fn events_after(&self, from: Cursor, max: usize) -> Result<Vec<Event>> {
        let after = i64::try_from(from.after).unwrap_or(i64::MAX);
        self.events_paged("id > $1 ORDER BY id LIMIT $2", after, max, None)
    }

    /// `Engine::last_event_id`: the newest event id committed.
    pub(super) fn feed_last(&self) -> Result<u64> {
        // With the root's `moved_to` mark: a follower opened before `migrate --to-local`
        // ends at its next look (each wait looks at least once a second), as a command
        // opened after it is refused.
        let cols = "last, (SELECT value FROM {s}.meta WHERE key = 'moved_to')";
        let v = self.rows_durable("reading the feed", (cols, "{s}.feed"), &[], |r| {
            Ok((r.get::<_, i64>(0), r.get::<_, Option<String>>(1)))
        })?;
        let (last, moved) = v.into_iter().next().unwrap_or((0, None));
        if let Some(to) = moved {
            return Err(super::moved_away(&self.target, &to));
        }
        Ok(u64::try_from(last).unwrap_or(0))
    }

    /// `Engine::wait_events`: the newest id once it passes `after`, or at `timeout`.
    pub(super) fn wait_feed(&self, after: u64, timeout: Duration) -> Result<u64> {
        let until = std::time::Instant::now() + timeout;
        let mut listener = self.listener.borrow_mut();
        if listener.is_none() {
            *listener = Some(listen::Listener::start(&self.target)?);
        }
        loop {
            // Read after listening: an event committed before the LISTEN is seen here.
            let last = self.feed_last()?;
            let now = std::time::Instant::now();
            if last > after || now >= until {
                return Ok(last);
            }
            // A notification lost with a broken connection costs at most one second; a
            // listener whose connection broke is made again.
            let slice = (until - now).min(std::time::Duration::from_secs(1));
            listen::Listener::wait_in(&mut listener, &self.target, slice);
        }
    }

    /// `Engine::read_events_back`: up to `max` events before `before`, newest first.
    pub(super) fn events_before(&self, before: Option<u64>, max: usize) -> Result<Vec<Event>> {
        let before = before.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
        self.events_paged("id < $1 ORDER BY id DESC LIMIT $2", before, max, None)
    }

    /// `Engine::subscribe`: a feed woken by notifications (or every `poll`).
    pub(super) fn feed(&self, poll: Option<Duration>) -> Result<Box<dyn EventFeed + '_>> {
        let seen = self.feed_last()?;
        Ok(Box::new(PgFeed { eng: self, seen, poll }))
    }

    /// `Engine::task_events`: the task's events after the cursor, oldest first. Only the
    /// lines that name its id in quotes leave the server (`engine::names_task`), read in one
    /// pass over the table.
    pub(super) fn task_events_after(&self, task: &TaskId, from: Cursor) -> Result<Vec<Event>> {
        let needle = crate::engine::names_task(task);
        let at = i64::try_from(from.after).unwrap_or(i64::MAX);
        // No ORDER BY on the server: the planner would walk the id index (it cannot tell how
        // few lines match). Sorted here.
        let (mut all, _, _) = self.events_where(
            "id > $1 AND strpos(line, $2) > 0",
            &[(&at, Type::INT8), (&needle, Type::TEXT)],
        )?;
        all.sort_unstable_by_key(|e| e.id);
        Ok(all.into_iter().filter(|e| e.task.as_ref() == Some(task)).collect())
    }

    /// `Engine::read_events_back_naming`: `events_before` of the lines that hold one of
    /// `naming`, chosen on the server (`strpos`), so only they cross the wire.
    pub(super) fn events_before_naming(
        &self,
        before: Option<u64>,
        max: usize,
        naming: &[String],
    ) -> Result<Vec<Event>> {
        if naming.is_empty() {
            return self.events_before(before, max);
        }
        let before = before.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
        match naming {
            [one] => self.events_paged(
                "id < $1 AND strpos(line, $3) > 0 ORDER BY id DESC LIMIT $2",
                before,
                max,
                Some(&(one, Type::TEXT)),
            ),
            many => self.events_paged(
                "id < $1 AND EXISTS (SELECT 1 FROM unnest($3::text[]) n WHERE strpos(line, n) > 0)
                 ORDER BY id DESC LIMIT $2",
                before,
                max,
                Some(&(&many, Type::TEXT_ARRAY)),
            ),
        }
    }

    /// Up to `max` events from `at` on, by `filter` (`$1` the place, `$2` the rows a page
    /// may bring, `$3` the `extra` value): pages are read until `max` events are found or
    /// a page comes short, so a line passed over (one that does not parse) takes no event's
    /// place, as on a folder: a short answer means the log's end (or start) was reached.
    fn events_paged(
        &self,
        filter: &str,
        mut at: i64,
        max: usize,
        extra: Option<&(&(dyn tokio_postgres::types::ToSql + Sync), Type)>,
    ) -> Result<Vec<Event>> {
        let mut out: Vec<Event> = Vec::new();
        while out.len() < max {
            let want = max - out.len();
            let limit = i64::try_from(want).unwrap_or(i64::MAX);
            let mut params: Vec<(&(dyn tokio_postgres::types::ToSql + Sync), Type)> =
                vec![(&at, Type::INT8), (&limit, Type::INT8)];
            params.extend(extra.cloned());
            let (events, rows, last) = self.events_where(filter, &params)?;
            out.extend(events);
            match last {
                Some(last) if rows >= want => at = last,
                _ => break,
            }
        }
        Ok(out)
    }

    /// `rows` of `SELECT cols FROM from`, a read of the event log, made durable before they
    /// are returned. A task's commit does not wait for the disk while it holds the feed
    /// counter (`conn::NO_WAIT`); its writer is answered only after the flush that follows,
    /// but a reader can see the commit in between. Were the server to crash then, the feed
    /// would hand the lost ids out again, and a reader that saw them would pass over the new
    /// events. So when the read found rows and the server's log is not on disk as far as it
    /// is written (asked by the same statement, in a last column: after its snapshot, so as
    /// far as every commit it sees), the log is flushed first (`conn::FLUSH`): what a reader
    /// sees is never taken back. Reads inside a transaction are made durable where it ends
    /// (a snapshot's: `snapshot`; a task's: its commit).
    fn rows_durable<T>(
        &self,
        what: &str,
        (cols, from): (&str, &str),
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
        f: impl Fn(&tokio_postgres::Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let plain = format!("SELECT {cols} FROM {from}");
        if self.open_tx.get() || self.in_block.get() || self.in_snapshot.get() {
            return self.rows(what, &plain, params, f);
        }
        let c = &self.conn.client;
        // TEST BUILDS ONLY (CIRCE_TEST_BREAK=pg-pipeline-past-idle): the question sent as a
        // statement of its own after the read, in the same round trip.
        if super::conn::past_idle() {
            let q = self.sql(&plain);
            let (rows, flushed) = self.conn.call(
                what,
                futures_util::future::try_join(
                    c.query_typed(&q, params),
                    c.query_typed(super::conn::FLUSHED, &[]),
                ),
            )?;
            self.make_durable(!rows.is_empty(), on_disk(&flushed))?;
            return rows.iter().map(f).collect();
        }
        let q = self.sql(&format!("SELECT {cols}, {} FROM {from}", super::conn::ON_DISK));
        let rows = self.conn.call(what, c.query_typed(&q, params))?;
        let on_disk = rows.iter().all(|r| r.get::<_, bool>(r.len() - 1));
        self.make_durable(!rows.is_empty(), on_disk)?;
        rows.iter().map(f).collect()
    }

    /// Flush the server's log when `read` found something that is not `on_disk` (the answer
    /// to `conn::ON_DISK`).
    pub(super) fn make_durable(&self, read: bool, on_disk: bool) -> Result<()> {
        // TEST BUILDS ONLY (CIRCE_TEST_BREAK=pg-read-unflushed): what a crash can take back
        // is shown.
        if !read || on_disk || test_break("pg-read-unflushed") {
            return Ok(());
        }
        self.conn.call(
            "flushing the server's log to disk",
            self.conn.client.batch_execute(super::conn::FLUSH),
        )
    }

    /// The events of the log selected by `filter` (what follows WHERE), in the order it
    /// names; with how many rows it read and the last row's id.
    fn events_where(
        &self,
        filter: &str,
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
    ) -> Result<(Vec<Event>, usize, Option<i64>)> {
        let rows = self.rows_durable(
            "reading events",
            ("id, line", &format!("{{s}}.events WHERE {filter}")),
            params,
            |r| Ok((r.get::<_, i64>(0), r.get::<_, String>(1))),
        )?;
        let (read, last) = (rows.len(), rows.last().map(|(id, _)| *id));
        let mut out = Vec::with_capacity(rows.len());
        for (id, line) in rows {
            let id = u64::try_from(id).unwrap_or(0);
            // A newer format is refused, not misread, naming the row (its id is the event's:
            // the line holds 0) and where it lies.
            if let Some(v) = event::newer_format_of_row(&line) {
                let at = self.events_table();
                return Err(event::newer_format(id, v).map_message(|m| format!("{m}, in {at}")));
            }
            match event::parse_line(&line) {
                Ok(Line::Event(mut e)) => {
                    e.id = id;
                    out.push(*e);
                }
                // A line that does not parse (written by hand: circe writes whole lines) is
                // passed over, as the local engine passes over a torn one; doctor names it.
                Ok(Line::Legacy) | Err(_) => {}
            }
        }
        Ok((out, read, last))
    }

    /// Where the event log lies, as a person names it in SQL: `table "<schema>".events`.
    pub(super) fn events_table(&self) -> String {
        format!("table \"{}\".events", self.target.schema)
    }
}

/// The answer to `conn::FLUSHED`: the server's log is on disk as far as it is written.
pub(super) fn on_disk(flushed: &[tokio_postgres::Row]) -> bool {
    flushed.first().is_none_or(|r| r.get::<_, bool>(0))
}
