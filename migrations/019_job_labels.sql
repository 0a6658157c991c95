-- Job labels: {"team": "vision", "project": "portraits"}, set at submit (POST /v1/jobs "labels", or
-- ?labels=team=vision,project=portraits with a raw AI Toolkit file), shown in every JOB and job
-- webhook, and a filter of GET /v1/jobs (?label=team=vision). Keys and values are short and plain
-- (common/labels.h), at most 16 per job. A column with a constant default is added without
-- rewriting the table. The index holds only labelled jobs (most jobs may have none): the list's
-- label filter names the same predicate so that it can use it.
ALTER TABLE jobs ADD COLUMN labels jsonb NOT NULL DEFAULT '{}';
CREATE INDEX jobs_labels ON jobs USING gin (labels jsonb_path_ops) WHERE labels <> '{}'::jsonb;
