-- Draining a worker from the control plane (POST /v1/workers/{id}/drain, sql/functions/31_drain.sql):
-- who drained it, when and why, while its state is 'draining'; NULL otherwise. The state itself
-- (online | draining | offline) is migration 001's.
ALTER TABLE workers ADD COLUMN drain jsonb;
