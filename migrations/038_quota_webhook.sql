-- Quota webhooks: when rungd's quota pass finds a team over its GPU-hour quota (over every pool, or in
-- one pool: migrations 035, 037), or back under it, it writes an outbox row of kind 'quota'
-- (quota.over / quota.under, sql/functions/45_quota.sql) for sessions that ask for job webhooks
-- (rungd --job-webhook): the team-facing URL, which hears when its jobs stop starting and start again.
-- Such a row has no escalation and no job: retention deletes it once it is older than --retain-days.
-- The CHECK is replaced NOT VALID: no row is read (every existing row is 'escalation' or 'job').
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_kind_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_kind_check CHECK (kind IN ('escalation', 'job', 'quota')) NOT VALID;
-- Retention's delete of old quota rows at every run (rung_prune) reads this, not the whole outbox
-- (one row per job that ended, with --job-webhook). Partial: empty until a quota is crossed; built by
-- one read of the outbox under the migration's lock.
CREATE INDEX webhook_outbox_quota ON webhook_outbox (created_at) WHERE kind = 'quota';
