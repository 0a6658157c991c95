-- The build a worker runs, as it registered (POST /v1/workers "version": rung-worker sends its
-- rung_version(), e.g. "v1.4.0-12-g3f2a9c1"): 1..64 printable ASCII characters, checked by rungd;
-- NULL for a worker from before versions, which sends none. Written at every registration, so it
-- is the version of the process that registered last under the name. GET /v1/workers and the GPUs
-- page list it; /metrics counts the live workers per version (rung_workers_by_version), so a
-- rollout over a fleet can be followed. (023 is another change's number: migrations apply by name,
-- in order, and a gap is harmless.)
ALTER TABLE workers ADD COLUMN version text CHECK (char_length(version) BETWEEN 1 AND 64);
