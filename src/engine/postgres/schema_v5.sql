-- Schema version 5: the chat channel (PROTOCOLS.md sections 13 and 18).

-- The channel's head: the newest entry's id, and the channel's size read as a file (bytes,
-- lines). An append moves it in its own transaction, so appends take ids one after another
-- in commit order, and a reader of `id > N` never skips one.
CREATE TABLE {s}.chat_head (
  id int PRIMARY KEY CHECK (id = 1),
  last bigint NOT NULL,
  bytes bigint NOT NULL,
  lines bigint NOT NULL
);
INSERT INTO {s}.chat_head VALUES (1, 0, 0, 0);

-- Every message said: its text (whole lines), where it starts in the file it belongs to
-- (byte offset, line number), and the archive that holds it (NULL: the channel).
CREATE TABLE {s}.chat (
  id bigint PRIMARY KEY,
  text text NOT NULL,
  byte_offset bigint NOT NULL,
  line bigint NOT NULL,
  archive text COLLATE "C"
);
CREATE INDEX chat_archive ON {s}.chat (archive) WHERE archive IS NOT NULL;

-- Append a message (with the sender's counter when `p_agent` is given: the number commits
-- with the line). Returns its id, offset and line. circe calls it with `p_agent` NULL and
-- moves the counter itself, by compare-and-set, in the calling statement (chat.rs).
CREATE FUNCTION {s}.chat_say(p_text text, p_agent text, p_epoch bigint, p_last bigint)
RETURNS TABLE (o_id bigint, o_offset bigint, o_line bigint) LANGUAGE plpgsql AS $$
DECLARE
  v_bytes bigint := octet_length(p_text);
  v_lines bigint := length(p_text) - length(replace(p_text, E'\n', ''));
BEGIN
  IF p_agent IS NOT NULL THEN
    INSERT INTO {s}.seq_counters (agent, epoch, last) VALUES (p_agent, p_epoch, p_last)
      ON CONFLICT (agent) DO UPDATE SET epoch = EXCLUDED.epoch, last = EXCLUDED.last;
  END IF;
  UPDATE {s}.chat_head SET last = last + 1, bytes = bytes + v_bytes, lines = lines + v_lines
    WHERE id = 1
    RETURNING last, bytes - v_bytes, lines - v_lines + 1 INTO o_id, o_offset, o_line;
  INSERT INTO {s}.chat (id, text, byte_offset, line) VALUES (o_id, p_text, o_offset, o_line);
  PERFORM pg_notify({channel}, 'chat');
  RETURN NEXT;
END $$;
