-- $1 name, $2 owner, $3 kind, $4 priority, $5 config, $6 recovery, $7 Idempotency-Key or NULL, $8 request body
SELECT rung_submit($1, $2, $3, $4::int, $5::jsonb, $6::jsonb, $7, md5($8::jsonb::text));
