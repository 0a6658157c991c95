-- $1 the registration {"name", "host", "gpus", "version"?, "pool", "borrow"} (rung_worker_join), $2 calling token
-- id, $3 caller is admin -> {"status", "id"?, "created"?, "pool"?, "borrow"?, "name", "version"}: the last two
-- as sent, for rungd's log line
SELECT rung_worker_join($1::jsonb, $2::bigint, $3::boolean)
       || jsonb_build_object('name', $1::jsonb->'name', 'version', $1::jsonb->'version');
