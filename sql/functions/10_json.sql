-- The API's JSON shapes of a job, an attempt, a GPU, an escalation and a token (docs/DESIGN.md).
-- A config stored as NULL is the job's target_config (migrations/006): these resolve it, so clients
-- never see the NULL.

-- A JOB without its two configs; rungd splices the config text in (api_jobs.c) so that a submit
-- reply does not make Postgres copy a ~3 KB config into a new jsonb twice and print it twice.
-- run_after (migration 025): when a scheduled job starts (or was to start, once it was started);
-- null for a job never scheduled. pool (migration 026): the workers it may run on. after (migration
-- 033): the jobs it runs after (null: none), waits_for: those of them it still waits for (null: none),
-- after_when (036): which of their endings release it, "succeeded", "ended" or "failed" (null without after).
CREATE OR REPLACE FUNCTION rung_job_json_lean(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', j.id, 'name', j.name, 'state', j.state, 'kind', j.kind, 'priority', j.priority,
    'owner', j.owner, 'pool', j.pool, 'labels', j.labels, 'recovery', j.recovery, 'recovery_state', j.recovery_state, 'constraints', j.constraints,
    'attempts', j.attempts_count, 'lost_count', j.lost_count,
    'cancel_requested', j.cancel_requested, 'created_at', j.created_at, 'updated_at', j.updated_at,
    'finished_at', j.finished_at, 'run_after', j.run_after, 'start_by', j.start_by, 'after', j.after_ids, 'waits_for', j.waits_for,
    'after_when', CASE WHEN j.after_ids IS NOT NULL THEN coalesce(j.after_when, 'succeeded') END,
    'result', CASE WHEN j.result IS NULL OR j.result ? 'config' THEN j.result
                   ELSE j.result || jsonb_build_object('config', j.target_config) END,
    'next_action', j.next_action)
$$;

-- JOB = the lean JOB and the two configs, current_config resolved (NULL is the target).
CREATE OR REPLACE FUNCTION rung_job_json(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT rung_job_json_lean(j) || jsonb_build_object('target_config', j.target_config,
                                                     'current_config', coalesce(j.current_config, j.target_config))
$$;

-- An attempt: its config resolved (NULL: it ran the target), FACTS with their log tail.
CREATE OR REPLACE FUNCTION rung_attempt_json(a attempts) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', a.id, 'job_id', a.job_id, 'number', a.number, 'worker_id', a.worker_id,
    'gpu_uuid', a.gpu_uuid, 'state', a.state, 'outcome', a.outcome, 'phase', a.phase,
    'step', a.step, 'total_steps', a.total_steps, 'memory_used_mib', a.memory_used_mib,
    'class', a.class, 'rule', a.rule, 'evidence', a.evidence, 'action', a.action, 'rung', a.rung,
    'changes', a.changes,
    'config', coalesce(a.config, (SELECT j.target_config FROM jobs j WHERE j.id = a.job_id)),
    'config_hash', a.config_hash,
    'facts', CASE WHEN a.facts IS NULL THEN NULL
                  ELSE a.facts || jsonb_build_object('log_tail', coalesce(a.log_tail, '[]')) END,
    'gpu_before', a.gpu_before, 'lease_expires_at', a.lease_expires_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'started_at', a.started_at, 'ended_at', a.ended_at)
$$;

-- A GPU: its state, env faults since its last release, when it was quarantined, its last health report.
CREATE OR REPLACE FUNCTION rung_gpu_json(g gpus) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'uuid', g.uuid, 'worker_id', g.worker_id, 'index', g.idx, 'name', g.name,
    'memory_total_mib', g.memory_total_mib, 'state', g.state, 'reason', g.reason,
    'env_faults', (SELECT count(*) FROM gpu_faults f
                   WHERE f.gpu_uuid = g.uuid AND f.at > coalesce(g.released_at, '-infinity')),
    'released_at', g.released_at, 'updated_at', g.updated_at,
    'quarantined_at', CASE WHEN g.state = 'quarantined' THEN g.quarantined_at END,
    'health', CASE WHEN g.health_at IS NULL THEN NULL
                   ELSE jsonb_build_object('at', g.health_at, 'passed', g.health_passed,
                                           'detail', g.health_detail) END)
$$;

-- An escalation; with full_report, its report (markdown and JSON) too.
CREATE OR REPLACE FUNCTION rung_escalation_json(e escalations, full_report boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', e.id, 'job_id', e.job_id, 'attempt_id', e.attempt_id, 'trigger', e.trigger,
    'state', e.state, 'summary', e.summary, 'recommendation', e.recommendation, 'note', e.note,
    'created_at', e.created_at, 'updated_at', e.updated_at)
    || CASE WHEN full_report
            THEN jsonb_build_object('report_markdown', e.report_markdown, 'report', e.report)
            ELSE '{}'::jsonb END
$$;

-- The API shape of a token: never the hash. expires_at is null for a token that never expires;
-- expired says whether it has, by the database's clock (migration 023); pools, the worker pools it
-- may use (migration 027), null for any.
CREATE OR REPLACE FUNCTION rung_token_json(t tokens) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('id', t.id, 'name', t.name, 'role', t.role, 'created_at', t.created_at,
                            'revoked_at', t.revoked_at, 'revoked', t.revoked_at IS NOT NULL,
                            'max_running', t.max_running, 'pool_max_running', t.pool_limits, 'pools', t.pools,
                            'gpu_hours', t.gpu_hours, 'gpu_hours_days', t.gpu_hours_days,
                            'pool_gpu_hours', t.pool_gpu_hours,
                            'expires_at', t.expires_at,
                            'expired', coalesce(t.expires_at <= now(), false))
$$;
