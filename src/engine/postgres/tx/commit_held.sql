-- The commit of a change to a task that exists, whose ticket stays or moves (claim, status,
-- heartbeat, release, reap): the same writes as `commit_task` for that case, as one
-- statement, so a fresh connection neither loads plpgsql nor compiles the function.
-- $1 task, $2 the row version loaded (< 0, test builds only: no check), $3 the record,
-- $4 the checks (NULL: unchanged), $5 the `.owner` record, $6 the box the ticket moves to
-- (NULL: it stays), $7 the claim's request id, $8 the event lines, $9 how many of the
-- moved ticket's first bytes to answer with, and its size (NULL: none; a claim shows its
-- summary), $10 a claim's claimer (NULL: not a claim), refused once retired.
-- Every write is conditioned on the row version, the claimer's retirement (read here, under
-- the task's lock) and the ticket's move, so when a check fails the statement changes
-- nothing and answers which check failed.
WITH p AS (
  SELECT $3::jsonb AS r, $4::jsonb AS c, $5::jsonb AS o
), gone AS (
  SELECT 1 FROM {s}.agents WHERE name = $10 AND retired_at IS NOT NULL
), cur AS (
  SELECT ticket, message FROM {s}.tasks
   WHERE task_id = $1 AND ($2 < 0 OR rev = $2) AND NOT EXISTS (SELECT 1 FROM gone) FOR UPDATE
), mv AS (
  UPDATE {s}.messages m SET box = $6 FROM cur
   WHERE $6 IS NOT NULL AND $6 <> cur.ticket AND m.box = cur.ticket AND m.file = cur.message
  RETURNING m.body
), ok AS (
  SELECT 1 FROM cur
   WHERE $6 IS NULL OR $6 = cur.ticket OR $2 < 0 OR EXISTS (SELECT 1 FROM mv)
), t AS (
  UPDATE {s}.tasks SET v = (r->>'v')::int, status = r->>'status', owner = r->>'owner',
      started_at = r->>'started_at', updated_at = r->>'updated_at',
      created_at = r->>'created_at', intent = r->>'intent', priority = r->>'priority',
      "to" = r->>'to', opened_by = r->>'opened_by', epoch = (r->>'epoch')::bigint,
      attempts = (r->>'attempts')::int, expiries = (r->>'expiries')::int,
      message = r->>'message', lease_expires_at = r->>'lease_expires_at',
      note = r->>'note', handoff = r->>'handoff',
      handoff_checks = coalesce(r->'handoff_checks', '[]'), checks = coalesce(c, checks),
      claimed_at = o->>'claimed_at', host = o->>'host', pid = (o->>'pid')::bigint,
      ticket = coalesce($6, ticket), rev = rev + 1,
      lease_until = (r->>'lease_expires_at')::timestamptz,
      deadline = r->>'deadline', deadline_at = (r->>'deadline')::timestamptz,
      asserted = coalesce(r->'asserted', '[]')
    FROM p, ok WHERE task_id = $1
  RETURNING 1
), g AS (
  INSERT INTO {s}.grants (agent, request, task, epoch)
  SELECT r->>'owner', $7, $1, (r->>'epoch')::bigint FROM p, t
   WHERE $7 IS NOT NULL AND r->>'owner' IS NOT NULL
  ON CONFLICT DO NOTHING
  RETURNING 1
), f AS (
  -- The feed's row stays locked until the COMMIT, and every commit waits for it: so the
  -- grant is written before it is taken (its count is read first), and only the events,
  -- which take their ids from it, after. No join: a commit that waited for the row
  -- rechecks its conditions on the new version (read committed), and a join's recheck
  -- starts the join's plan again, with the row locked.
  UPDATE {s}.feed SET last = last + cardinality($8::text[])
   WHERE id = 1 AND cardinality($8::text[]) > 0 AND EXISTS (SELECT 1 FROM t)
     AND (SELECT count(*) FROM g) >= 0
  RETURNING last, cardinality($8::text[]) AS k
), e AS (
  INSERT INTO {s}.events (id, task, line)
  SELECT f.last - f.k + x.o, $1, x.l FROM f, unnest($8::text[]) WITH ORDINALITY AS x(l, o)
)
SELECT EXISTS (SELECT 1 FROM cur), EXISTS (SELECT 1 FROM t),
       coalesce((SELECT last - k + 1 FROM f), 0)::int8,
       (SELECT pg_notify({channel}, last::text) FROM f),
       (SELECT substring(body FROM 1 FOR $9) FROM mv, t WHERE $9 IS NOT NULL),
       (SELECT octet_length(body) FROM mv, t WHERE $9 IS NOT NULL),
       EXISTS (SELECT 1 FROM gone)
