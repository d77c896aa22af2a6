-- circe's tables, schema version 1 (PROTOCOLS.md section 18). `{s}` is the root's schema.
CREATE SCHEMA IF NOT EXISTS {s};

-- schema_version, clock (server | client), and moved_to when a root was exported.
CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL);

-- The root's circe.yaml (every host reads the same settings and registry).
CREATE TABLE {s}.config (id int PRIMARY KEY CHECK (id = 1), text text NOT NULL);

CREATE TABLE {s}.agents (name text COLLATE "C" PRIMARY KEY, role text NOT NULL);

-- Every message: its box (`new`, `inbox:<a>`, `workspace:<a>`, `logs`), file name, bytes.
CREATE TABLE {s}.messages (
  box text COLLATE "C" NOT NULL,
  file text COLLATE "C" NOT NULL,
  body bytea NOT NULL,
  owner text COLLATE "C" GENERATED ALWAYS AS (nullif(split_part(box, ':', 2), '')) STORED,
  msg_id text,
  PRIMARY KEY (box, file)
);
CREATE INDEX messages_msg_id ON {s}.messages (msg_id) WHERE msg_id IS NOT NULL;

-- One row per task: the `.status` fields under their record names, then `.checks`, the
-- `.owner` extras, where the ticket lies, and the engine's own columns.
CREATE TABLE {s}.tasks (
  task_id text COLLATE "C" PRIMARY KEY,
  v int NOT NULL,
  status text NOT NULL,
  owner text COLLATE "C",
  started_at text,
  updated_at text COLLATE "C" NOT NULL,
  created_at text NOT NULL,
  intent text COLLATE "C" NOT NULL,
  priority text NOT NULL,
  "to" text COLLATE "C" NOT NULL,
  opened_by text NOT NULL,
  epoch bigint NOT NULL,
  attempts int NOT NULL,
  expiries int NOT NULL,
  message text COLLATE "C" NOT NULL,
  lease_expires_at text,
  note text,
  handoff text,
  handoff_checks jsonb NOT NULL DEFAULT '[]',
  checks jsonb NOT NULL DEFAULT '{}',
  claimed_at text,
  host text,
  pid bigint,
  ticket text COLLATE "C" NOT NULL,
  rev bigint NOT NULL DEFAULT 1,
  lease_until timestamptz,
  rank smallint GENERATED ALWAYS AS
    (CASE priority WHEN 'high' THEN 0 WHEN 'low' THEN 2 ELSE 1 END) STORED
);
-- claim --next: waiting tasks by priority, then time waiting.
CREATE INDEX tasks_waiting ON {s}.tasks (rank, updated_at, task_id) WHERE status = 'new';
-- reap: held tasks by lease end.
CREATE INDEX tasks_leased ON {s}.tasks (lease_until) WHERE lease_until IS NOT NULL;

-- The grants claims made, by request id: a retry of a claim whose outcome was unknown
-- finds its grant here (`reap` forgets those older than 7 days).
CREATE TABLE {s}.grants (
  agent text COLLATE "C" NOT NULL,
  request text NOT NULL,
  task text COLLATE "C" NOT NULL,
  epoch bigint NOT NULL,
  at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent, request)
);

-- The event log. Ids come from `feed.last`, updated in the committing transaction, so ids
-- become visible in id order and a reader of `id > N` never skips one.
CREATE TABLE {s}.feed (id int PRIMARY KEY CHECK (id = 1), last bigint NOT NULL);
INSERT INTO {s}.feed VALUES (1, 0);
CREATE TABLE {s}.events (id bigint PRIMARY KEY, task text COLLATE "C", line text NOT NULL);

-- Each named consumer's saved place (`kind`: events, chat), its value as the kind writes it.
CREATE TABLE {s}.cursors (
  kind text COLLATE "C" NOT NULL,
  name text COLLATE "C" NOT NULL,
  value bytea NOT NULL,
  PRIMARY KEY (kind, name)
);

-- Events a consumer's hook kept failing on, in the order they were set aside.
CREATE TABLE {s}.dead_letters (
  consumer text COLLATE "C" NOT NULL,
  n bigserial,
  line text NOT NULL,
  PRIMARY KEY (consumer, n)
);

-- `name`, `name.2.md`, `name.3.md`, ... (message::numbered).
CREATE FUNCTION {s}.numbered(base text, n int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN n <= 1 OR right(base, 3) <> '.md' THEN base
              ELSE left(base, -3) || '.' || n || '.md' END
$$;

-- Put `body` into `box` under the first free numbered name; returns the name.
CREATE FUNCTION {s}.put_message(p_box text, p_name text, p_body bytea, p_msg_id text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_name text;
BEGIN
  FOR i IN 1..9999 LOOP
    v_name := {s}.numbered(p_name, i);
    INSERT INTO {s}.messages (box, file, body, msg_id) VALUES (p_box, v_name, p_body, p_msg_id)
      ON CONFLICT DO NOTHING;
    IF FOUND THEN RETURN v_name; END IF;
  END LOOP;
  RAISE EXCEPTION 'circe:conflict:no free name for % in %', p_name, p_box;
END $$;

-- Append events (JSON lines, id 0) with the next ids; the placeholder "@circe:ticket@"
-- becomes `p_ticket`. Returns the first id (0 when there were none).
CREATE FUNCTION {s}.append_events(p_task text, p_lines text[], p_ticket text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE v_k int := coalesce(array_length(p_lines, 1), 0); v_last bigint;
BEGIN
  IF v_k = 0 THEN RETURN 0; END IF;
  UPDATE {s}.feed SET last = last + v_k WHERE id = 1 RETURNING last INTO v_last;
  INSERT INTO {s}.events (id, task, line)
    SELECT v_last - v_k + x.o, p_task,
           CASE WHEN p_ticket IS NULL THEN x.l
                ELSE replace(x.l, '"@circe:ticket@"', to_json(p_ticket)::text) END
    FROM unnest(p_lines) WITH ORDINALITY AS x(l, o);
  PERFORM pg_notify({channel}, v_last::text);
  RETURN v_last - v_k + 1;
END $$;

-- Commit one task change (engine::TaskTx::commit): the ticket's move or delivery, the
-- record, the events, all or nothing. `p_seen` is the row version the transaction loaded
-- (0: the task is being opened). Returns the ticket's name and the first event id.
CREATE FUNCTION {s}.commit_task(p_task text, p_seen bigint, p_rec jsonb, p_checks jsonb,
    p_owner jsonb, p_move text, p_name text, p_body bytea, p_msg_id text, p_events text[],
    p_request text)
RETURNS TABLE (o_file text, o_first bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_cur {s}.tasks%ROWTYPE;
  v_tick text;
  v_file text := p_rec->>'message';
BEGIN
  -- p_seen < 0 (test builds only, CIRCE_TEST_BREAK=pg-unlocked): no version check.
  IF p_seen <> 0 THEN
    SELECT * INTO v_cur FROM {s}.tasks WHERE task_id = p_task FOR UPDATE;
    IF NOT FOUND OR (p_seen > 0 AND v_cur.rev <> p_seen) THEN
      RAISE EXCEPTION 'circe:race:task % changed meanwhile', p_task;
    END IF;
    v_tick := v_cur.ticket;
  END IF;
  IF p_name IS NOT NULL THEN
    v_file := {s}.put_message('new', p_name, p_body, p_msg_id);
    v_tick := 'new';
  ELSIF p_move IS NOT NULL AND p_move <> v_tick THEN
    UPDATE {s}.messages SET box = p_move WHERE box = v_tick AND file = v_cur.message;
    IF NOT FOUND AND p_seen > 0 THEN
      RAISE EXCEPTION 'circe:conflict:the message of task % is not in %', p_task, v_tick;
    END IF;
    v_tick := p_move;
  END IF;
  IF p_seen = 0 THEN
    INSERT INTO {s}.tasks (task_id, v, status, owner, started_at, updated_at, created_at,
        intent, priority, "to", opened_by, epoch, attempts, expiries, message,
        lease_expires_at, note, handoff, handoff_checks, checks, claimed_at, host, pid,
        ticket, rev, lease_until)
    VALUES (p_task, (p_rec->>'v')::int, p_rec->>'status', p_rec->>'owner',
        p_rec->>'started_at', p_rec->>'updated_at', p_rec->>'created_at', p_rec->>'intent',
        p_rec->>'priority', p_rec->>'to', p_rec->>'opened_by', (p_rec->>'epoch')::bigint,
        (p_rec->>'attempts')::int, (p_rec->>'expiries')::int, v_file,
        p_rec->>'lease_expires_at', p_rec->>'note', p_rec->>'handoff',
        coalesce(p_rec->'handoff_checks', '[]'), coalesce(p_checks, '{}'),
        p_owner->>'claimed_at', p_owner->>'host', (p_owner->>'pid')::bigint, v_tick, 1,
        (p_rec->>'lease_expires_at')::timestamptz)
    ON CONFLICT (task_id) DO NOTHING;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'circe:race:task % was opened meanwhile', p_task;
    END IF;
  ELSE
    UPDATE {s}.tasks SET v = (p_rec->>'v')::int, status = p_rec->>'status',
        owner = p_rec->>'owner', started_at = p_rec->>'started_at',
        updated_at = p_rec->>'updated_at', created_at = p_rec->>'created_at',
        intent = p_rec->>'intent', priority = p_rec->>'priority', "to" = p_rec->>'to',
        opened_by = p_rec->>'opened_by', epoch = (p_rec->>'epoch')::bigint,
        attempts = (p_rec->>'attempts')::int, expiries = (p_rec->>'expiries')::int,
        message = v_file, lease_expires_at = p_rec->>'lease_expires_at',
        note = p_rec->>'note', handoff = p_rec->>'handoff',
        handoff_checks = coalesce(p_rec->'handoff_checks', '[]'),
        checks = coalesce(p_checks, checks), claimed_at = p_owner->>'claimed_at',
        host = p_owner->>'host', pid = (p_owner->>'pid')::bigint, ticket = v_tick,
        rev = rev + 1,
        lease_until = (p_rec->>'lease_expires_at')::timestamptz
      WHERE task_id = p_task;
  END IF;
  IF p_request IS NOT NULL AND p_rec->>'owner' IS NOT NULL THEN
    INSERT INTO {s}.grants (agent, request, task, epoch)
      VALUES (p_rec->>'owner', p_request, p_task, (p_rec->>'epoch')::bigint)
      ON CONFLICT DO NOTHING;
  END IF;
  o_file := v_file;
  o_first := {s}.append_events(p_task, p_events, v_file);
  RETURN NEXT;
END $$;
