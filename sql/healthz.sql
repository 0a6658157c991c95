-- GET /healthz, polled by load balancers: the database answers, with the number of the highest
-- migration applied (NNN of migrations/NNN_name.sql, as schema_migrations records them; 0 when none).
-- schema_migrations has one row per migration, a few dozen: one short scan, no other table read.
SELECT coalesce(max(substring(name FROM '^[0-9]+')::int), 0) FROM schema_migrations;
