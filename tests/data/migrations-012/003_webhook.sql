-- The escalation webhook outbox: one row per escalation, written by a trigger in the same
-- transaction that opens the escalation (rung_finish_apply), so no escalation is ever without
-- its notification, even across a crash. rungd's delivery loop claims due rows (SKIP LOCKED and
-- a claim deadline keep replicas from sending the same row at once), POSTs the payload and marks
-- it delivered on 2xx, or schedules the next try with exponential backoff. At-least-once: a
-- crash between the POST and the mark sends the row again.
CREATE TABLE webhook_outbox (
  id              bigserial PRIMARY KEY,
  escalation_id   bigint NOT NULL UNIQUE REFERENCES escalations (id),
  payload         jsonb NOT NULL,
  attempts        int NOT NULL DEFAULT 0,            -- deliveries tried so far
  next_attempt_at timestamptz NOT NULL DEFAULT now(), -- not tried again before this
  claimed_until   timestamptz,                        -- a replica is sending it until then
  last_status     int,                                -- HTTP status of the last try (0: no answer)
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at) WHERE delivered_at IS NULL;

CREATE FUNCTION rung_webhook_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_outbox (escalation_id, payload)
  VALUES (NEW.id, jsonb_build_object(
    'event', 'escalation.opened',
    'escalation_id', NEW.id, 'job_id', NEW.job_id, 'attempt_id', NEW.attempt_id,
    'trigger', NEW.trigger, 'summary', NEW.summary, 'recommendation', NEW.recommendation,
    'report', '/v1/escalations/' || NEW.id, 'ui', '/ui/escalations/' || NEW.id,
    'created_at', NEW.created_at));
  RETURN NULL;
END $$;

CREATE TRIGGER escalations_webhook AFTER INSERT ON escalations
FOR EACH ROW EXECUTE FUNCTION rung_webhook_enqueue();
