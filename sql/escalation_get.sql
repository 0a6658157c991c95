-- $1 escalation id -> escalation with report (no row when missing)
SELECT rung_escalation_json(e, true) FROM escalations e WHERE e.id = $1::bigint;
