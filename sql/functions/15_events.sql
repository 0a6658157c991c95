-- The events view (migration 015) shows event_log and the attempts' `leased` events; an INSERT INTO events
-- writes the row into event_log, so the paths that are not hot (cancel, release, reap, GPU health, escalations)
-- and older code insert as they did. The hot paths (submit, claim, finish) write event_log directly or nothing.
-- Its ids are the log's ids doubled (a finish row's job event is the id after it) and the attempts'
-- lease_event_id doubled, all from one sequence (events_id_seq), so ORDER BY id is the order in which things
-- happened, as before migration 015.
CREATE OR REPLACE VIEW events AS
  SELECT e.id * 2 AS id, e.job_id, e.attempt_id, e.kind, e.from_state, e.to_state, e.reason,
         CASE WHEN e.data ? 'job_event' THEN e.data - 'job_event' ELSE e.data END AS data, e.at
  FROM event_log e
  UNION ALL
  -- a finish's row also says how the job moved (rung_finish_apply_batch)
  SELECT e.id * 2 + 1, e.job_id, e.attempt_id, e.data->'job_event'->>'kind', e.data->'job_event'->>'from_state',
         e.data->'job_event'->>'to_state', e.reason, NULL::jsonb, e.at
  FROM event_log e WHERE e.data ? 'job_event'
  UNION ALL
  -- an attempt is its own `leased` event (same time, same transaction as the claim)
  SELECT a.lease_event_id * 2, a.job_id, a.id, 'leased'::text, 'queued'::text, 'running'::text,
         'attempt ' || a.number || ' started',
         jsonb_build_object('number', a.number, 'worker_id', a.worker_id, 'gpu_uuid', a.gpu_uuid,
                            'config_hash', a.config_hash), a.started_at
  FROM attempts a WHERE a.lease_event_id IS NOT NULL;

CREATE OR REPLACE FUNCTION rung_events_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_log (job_id, attempt_id, kind, from_state, to_state, reason, data, at)
  VALUES (NEW.job_id, NEW.attempt_id, NEW.kind, NEW.from_state, NEW.to_state, NEW.reason, NEW.data,
          coalesce(NEW.at, now()))
  RETURNING id * 2, at INTO NEW.id, NEW.at;
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER events_insert INSTEAD OF INSERT ON events
  FOR EACH ROW EXECUTE FUNCTION rung_events_insert();

-- Lease waits: for every `leased` event, the seconds since the latest event before it that queued the
-- job (submitted, re-queued, lease released). One pass over the queueing and leased events in (job,
-- id) order; a filter on job_id reaches inside (it is the window's partition), so the waits of a few
-- jobs read only theirs. /metrics' histogram (sql/metrics_history.sql) and retention's record of what
-- it deletes (75_prune.sql) read it. It depends on `events`: a migration that drops that view drops
-- this one first (CASCADE; this file recreates both).
CREATE OR REPLACE VIEW lease_waits AS
  SELECT s.job_id, extract(epoch FROM s.at - s.queued_at)::float8 AS w
  FROM (SELECT e.job_id, e.kind, e.at,
               max(e.at) FILTER (WHERE e.to_state = 'queued')
                 OVER (PARTITION BY e.job_id ORDER BY e.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS queued_at
        FROM events e WHERE e.to_state = 'queued' OR e.kind = 'leased') s
  WHERE s.kind = 'leased' AND s.queued_at IS NOT NULL;
