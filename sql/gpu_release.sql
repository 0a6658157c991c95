-- $1 gpu uuid -> GPU or NULL
SELECT rung_gpu_release($1);
