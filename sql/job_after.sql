-- POST /v1/jobs/{id}/after and rungctl after: $1 job id, $2 the jobs it runs after (bigint[] text; NULL:
-- none), $3 the owner they must belong to (NULL: any, for staff), $4 who -> {"status": "ok" | "conflict" |
-- "after_unknown" | "cycle", ...} or NULL (rung_set_after, sql/functions/23_scheduled.sql)
SELECT rung_set_after($1::bigint, $2::bigint[], $3::text, $4::text);
