-- $1 name, $2 host, $3 gpus array -> {"id", "created"}
SELECT rung_register($1, $2, $3::jsonb);
