-- POST /v1/jobs/cancel (api_jobs_cancel_matching): $1 state ('queued', 'running', 'active'), $2 owner,
-- $3 labels (jsonb), $4 kind (each NULL: any), $5 most jobs, $6 dry run -> {"ids", "more"}
-- (rung_cancel_matching, sql/functions/21_cancel.sql)
SELECT rung_cancel_matching($1::text, $2::text, $3::jsonb, $4::text, $5::int, $6::boolean);
