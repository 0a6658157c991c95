-- Quota webhooks: when rungd's quota pass finds a team over its GPU-hour quota (over every pool, or in
-- one pool: migrations 035, 037), or back under it, it writes an outbox row of kind 'quota'
-- (quota.over / quota.under, sql/functions/45_quota.sql) for sessions that ask for job webhooks
-- (rungd --job-webhook): the team-facing URL, which hears when its jobs stop starting and start again.
-- Such a row has no escalation and no job: retention deletes it once it is older than --retain-days.
-- The CHECK is replaced NOT VALID: no row is read (every existing row is 'escalation' or 'job').
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_kind_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_kind_check CHECK (kind IN ('escalation', 'job', 'quota')) NOT VALID;
