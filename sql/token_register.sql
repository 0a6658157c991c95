-- $1 name, $2 host, $3 gpus array, $4 calling token id, $5 caller is admin -> {"status", "id"?, "created"?}
SELECT rung_register_owned($1, $2, $3::jsonb, $4::bigint, $5::boolean);
