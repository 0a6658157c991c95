-- Escalations: their transitions, and the webhook outbox row (migrations/003) that a trigger
-- writes in the same transaction that opens one, so no escalation is ever without its notification;
-- and the job webhook's row (migration 018), written the same way when a job ends.

-- Escalation transitions: open -> acknowledged -> resolved (open -> resolved too). Repeating a
-- transition is a no-op. Returns {"status": "ok"|"conflict", "escalation"} or NULL when missing.
CREATE OR REPLACE FUNCTION rung_escalation_set(p_id bigint, p_state text, p_note text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  e escalations;
BEGIN
  SELECT * INTO e FROM escalations WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF p_state = 'acknowledged' AND e.state = 'resolved' THEN
    RETURN jsonb_build_object('status', 'conflict', 'escalation', rung_escalation_json(e, false));
  END IF;
  IF e.state <> p_state THEN
    UPDATE escalations SET state = p_state, note = coalesce(p_note, note), updated_at = now()
    WHERE id = p_id RETURNING * INTO e;
    INSERT INTO events (job_id, kind, from_state, to_state, reason, data)
    VALUES (e.job_id, 'escalation_' || p_state, NULL, p_state, p_note,
            jsonb_build_object('escalation_id', e.id));
  END IF;
  RETURN jsonb_build_object('status', 'ok', 'escalation', rung_escalation_json(e, true));
END $$;

-- The outbox row of a new escalation; rungd's delivery loop (server/webhook.c) sends it.
CREATE OR REPLACE FUNCTION rung_webhook_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (escalation_id, payload)
  VALUES (NEW.id, jsonb_build_object(
    'event', 'escalation.opened',
    'escalation_id', NEW.id, 'job_id', NEW.job_id, 'attempt_id', NEW.attempt_id,
    'labels', (SELECT j.labels FROM jobs j WHERE j.id = NEW.job_id), -- support routes by team
    'trigger', NEW.trigger, 'summary', NEW.summary, 'recommendation', NEW.recommendation,
    'report', '/v1/escalations/' || NEW.id, 'ui', '/ui/escalations/' || NEW.id,
    'created_at', NEW.created_at));
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER escalations_webhook AFTER INSERT ON escalations
FOR EACH ROW EXECUTE FUNCTION rung_webhook_enqueue();

-- The outbox row of a job that ended (--job-webhook, migration 018): its state, the result's summary
-- and where to read more. Only for sessions that set rung.job_webhook (rungd with --job-webhook): the
-- trigger's WHEN reads the setting, so without it an ending costs no call and writes nothing.
CREATE OR REPLACE FUNCTION rung_job_webhook_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (kind, job_id, payload)
  VALUES ('job', NEW.id, jsonb_build_object(
    'event', 'job.' || NEW.state,
    'job_id', NEW.id, 'name', NEW.name, 'owner', NEW.owner, 'labels', NEW.labels, 'kind', NEW.kind, 'state', NEW.state,
    'attempts', NEW.attempts_count,
    'summary', coalesce(NEW.result->>'summary', NEW.result->>'reason'),
    'class', NEW.result->>'class',
    'job', '/v1/jobs/' || NEW.id, 'ui', '/ui/jobs/' || NEW.id,
    'finished_at', NEW.finished_at));
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_ended_webhook AFTER UPDATE OF state ON jobs
FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('succeeded', 'failed', 'cancelled')
                   AND current_setting('rung.job_webhook', true) = 'on')
EXECUTE FUNCTION rung_job_webhook_enqueue();
