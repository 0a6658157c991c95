-- POST /v1/jobs/cancel (api_jobs_cancel_matching) and the queue page's form: $1 state ('queued',
-- 'scheduled', 'running', 'active'), $2 owner, $3 labels (jsonb), $4 kind, $7 pool, $8 the job the ones
-- to cancel wait for (each NULL: any), $5 most jobs, $6 dry run -> {"ids", "more"} (rung_cancel_where,
-- sql/functions/21_cancel.sql)
SELECT rung_cancel_where(jsonb_strip_nulls(jsonb_build_object('state', $1::text, 'owner', $2::text, 'labels', $3::jsonb,
                                                              'kind', $4::text, 'pool', $7::text, 'after', $8::bigint)),
                         $5::int, $6::boolean);
