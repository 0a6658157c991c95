-- Web escalation page. $1 escalation id, $2 owner or NULL -> ESCALATION with report + job_name, job_state;
-- no row when missing or not the owner's
SELECT rung_escalation_json(e, true) || jsonb_build_object('job_name', j.name, 'job_state', j.state)
FROM escalations e JOIN jobs j ON j.id = e.job_id
WHERE e.id = $1::bigint AND ($2::text IS NULL OR j.owner = $2::text);
