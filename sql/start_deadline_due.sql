-- $1 max jobs -> (job_id, start_by) of the jobs cancelled because their start deadline passed before
-- they started (rung_start_deadline_due, migration 039), earliest first
SELECT job_id, start_by FROM rung_start_deadline_due($1::int);
