-- $1 days, $2 most jobs, $3 the lease-wait histogram's bounds (float8[] text) -> how many jobs
-- retention deleted (rung_prune, sql/functions/75_prune.sql)
SELECT rung_prune($1::int, $2::int, $3::float8[]);
