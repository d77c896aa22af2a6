-- Schema version 7: the tombstones of tasks a folder archived before it moved here
-- (PROTOCOLS.md sections 17 and 18). A database root keeps no archive, but an archived id
-- is never opened again: `circe migrate --to` brings each tombstone (its JSON, as
-- ARCHIVE/tombstones/<task> holds it), and opening a task asks here when
-- `meta.tombstones` says there are any.
CREATE TABLE {s}.tombstones (
  task_id text COLLATE "C" PRIMARY KEY,
  tombstone text NOT NULL
);
