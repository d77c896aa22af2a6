-- Schema version 3: what TX adds (PROTOCOLS.md section 16).

-- Each agent's current prompt (the whole prompt message) and when it was retired.
ALTER TABLE {s}.agents ADD COLUMN prompt bytea, ADD COLUMN retired_at text;

-- A task's deadline as its record writes it, and as a time (reap's index).
ALTER TABLE {s}.tasks ADD COLUMN deadline text COLLATE "C", ADD COLUMN deadline_at timestamptz;

-- claim --next: waiting tasks by priority, then deadline (none: last), then time waiting.
DROP INDEX {s}.tasks_waiting;
CREATE INDEX tasks_waiting ON {s}.tasks (rank, (deadline IS NULL), deadline, updated_at, task_id)
  WHERE status = 'new';
-- reap: unfinished tasks by deadline.
CREATE INDEX tasks_deadline ON {s}.tasks (deadline_at)
  WHERE deadline_at IS NOT NULL AND status NOT IN ('completed', 'failed', 'expired');

-- One row per ask: its record as JSON (`tx::AskRecord`), and `rev`, the revision a write
-- compares and sets.
CREATE TABLE {s}.asks (
  msg_id text COLLATE "C" PRIMARY KEY,
  rev bigint NOT NULL,
  record text NOT NULL
);

-- commit_task writes the deadline too (the rest as in version 1).
CREATE OR REPLACE FUNCTION {s}.commit_task(p_task text, p_seen bigint, p_rec jsonb, p_checks jsonb,
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
        ticket, rev, lease_until, deadline, deadline_at)
    VALUES (p_task, (p_rec->>'v')::int, p_rec->>'status', p_rec->>'owner',
        p_rec->>'started_at', p_rec->>'updated_at', p_rec->>'created_at', p_rec->>'intent',
        p_rec->>'priority', p_rec->>'to', p_rec->>'opened_by', (p_rec->>'epoch')::bigint,
        (p_rec->>'attempts')::int, (p_rec->>'expiries')::int, v_file,
        p_rec->>'lease_expires_at', p_rec->>'note', p_rec->>'handoff',
        coalesce(p_rec->'handoff_checks', '[]'), coalesce(p_checks, '{}'),
        p_owner->>'claimed_at', p_owner->>'host', (p_owner->>'pid')::bigint, v_tick, 1,
        (p_rec->>'lease_expires_at')::timestamptz, p_rec->>'deadline',
        (p_rec->>'deadline')::timestamptz)
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
        lease_until = (p_rec->>'lease_expires_at')::timestamptz,
        deadline = p_rec->>'deadline', deadline_at = (p_rec->>'deadline')::timestamptz
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
