-- Schema version 6: the journal of a send's or a move's events (PROTOCOLS.md sections 6
-- and 18). A message that is no task's ticket is delivered (or moved) by one statement and
-- its events appended by the next; a client killed in between would leave the message
-- without its event. The delivering (or moving) statement inserts a row here, so the row
-- exists exactly when the delivery committed. The events are logged by whoever deletes the
-- row: the sender's append (`WITH d AS (DELETE ... RETURNING 1) SELECT append_events(...)
-- FROM d`) or a settler (`circe doctor --repair`, a send naming its own id), so they are
-- logged once, and no lock is held across a round trip.
CREATE TABLE {s}.event_journals (
  key text PRIMARY KEY,
  msg_id text NOT NULL,
  -- The events as the sender will log them (lines of the log), under the names the copies
  -- wanted.
  lines text[] NOT NULL,
  -- Each copy's box, the name it wanted and the name it got (a numbered one when the
  -- wanted name was taken), as the statement made them: a settler names the copies in the
  -- events so, as the sender would have.
  boxes text[] NOT NULL,
  wanted text[] NOT NULL,
  got text[] NOT NULL,
  backend int NOT NULL DEFAULT pg_backend_pid(),
  made_at timestamptz NOT NULL DEFAULT now()
);
