-- $1 gpu uuid, $2 reporting worker token id or NULL (staff), $3 passed, $4 detail, $5 GPUSTATE or NULL,
-- $6 minimum quarantine seconds -> {"status": "ok"|"not_found", "uuid", "state", "from_state", "next_check_ms"}
SELECT rung_gpu_health($1, $2::bigint, $3::boolean, $4, $5::jsonb, $6::int);
