-- $1 state or NULL -> {"escalations": [...]} newest first
SELECT jsonb_build_object('escalations', coalesce((SELECT jsonb_agg(rung_escalation_json(e, false) ORDER BY e.id DESC)
  FROM escalations e WHERE $1::text IS NULL OR e.state = $1::text), '[]'));
