-- $1 name, $2 host, $3 gpus array, $4 calling token id, $5 caller is admin, $6 version or NULL
-- -> {"status", "id"?, "created"?, "name", "version"}: the last two as sent, for rungd's log line
SELECT rung_worker_register_owned($1, $2, $3::jsonb, $4::bigint, $5::boolean, $6::text)
       || jsonb_build_object('name', $1::text, 'version', $6::text);
