-- What a resume spared, in GPU seconds (an estimate, sql/functions/61_finish_apply.sql
-- rung_resumed_gpu_s): the steps the attempt did not run again (resumed_step) at its own pace
-- (FACTS train_ms over train_steps, as rung-worker timed them). Written by the finish beside
-- resumed_step, so that /metrics and GET /v1/usage sum a column instead of unpacking FACTS; NULL
-- when the attempt did not resume or its pace is unknown (a worker before it, too few steps timed).
-- No default: no row is rewritten.
ALTER TABLE attempts ADD COLUMN resumed_gpu_s real;
