-- $1 days, $2 most jobs -> how many jobs retention deleted (rung_prune, sql/functions/75_prune.sql)
SELECT rung_prune($1::int, $2::int);
