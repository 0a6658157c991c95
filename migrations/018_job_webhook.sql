-- Job webhooks (--job-webhook URL): the outbox also carries a row per job that ends (succeeded,
-- failed, cancelled), written by a trigger on jobs in the transaction that ends it
-- (sql/functions/80_escalations.sql) when the session asks for them (rungd started with
-- --job-webhook sets rung.job_webhook on its sessions), and delivered by the same loop to that URL.
-- kind says which URL a row goes to; a job row has no escalation, and a job that ends again after a
-- retry has a row per ending.
ALTER TABLE webhook_outbox ALTER COLUMN escalation_id DROP NOT NULL,
  ADD COLUMN kind text NOT NULL DEFAULT 'escalation' CHECK (kind IN ('escalation', 'job')),
  ADD COLUMN job_id bigint;
CREATE INDEX webhook_outbox_job ON webhook_outbox (job_id) WHERE job_id IS NOT NULL;
