-- POST /v1/jobs/{id}/after and rungctl after: $1 job id, $2 the jobs it runs after (bigint[] text; NULL:
-- none), $3 after_when ("succeeded", "ended", "failed"; NULL: the job's own is kept, migration 036), $4 the
-- owner they must belong to (NULL: any, for staff), $5 who -> {"status": "ok" | "conflict" |
-- "after_unknown" | "after_never" | "cycle", ...} or NULL (rung_set_after_when, sql/functions/23_scheduled.sql)
SELECT rung_set_after_when($1::bigint, $2::bigint[], $3::text, $4::text, $5::text);
