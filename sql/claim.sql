-- $1 worker id, $2 gpu uuid, $3 lease seconds, $4 gpu_before or NULL -> {"status", "lease"?}
SELECT rung_claim($1::bigint, $2, $3::int, $4::jsonb);
