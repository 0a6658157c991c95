-- Web escalations page. $1 state or NULL, $2 owner or NULL -> {"escalations": [ESCALATION + job_name, job_state]}
-- newest first
SELECT jsonb_build_object('escalations', coalesce((SELECT jsonb_agg(rung_escalation_json(e, false)
    || jsonb_build_object('job_name', j.name, 'job_state', j.state) ORDER BY e.id DESC)
  FROM escalations e JOIN jobs j ON j.id = e.job_id
  WHERE ($1::text IS NULL OR e.state = $1::text) AND ($2::text IS NULL OR j.owner = $2::text)), '[]'));
