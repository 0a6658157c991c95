-- $1 id, $2 new state (acknowledged|resolved), $3 note -> {"status", "escalation"} or NULL
SELECT rung_escalation_set($1::bigint, $2, $3);
