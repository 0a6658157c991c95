-- The baseline: the same row inserted into a twin of attempt_logs, with no fence and no look-up.
\set aid :client_id + 1
\set upto :pos + :bytes
INSERT INTO bench_log_bare (attempt_id, byte_from, byte_to, body) VALUES (:aid, :pos, :upto, :body);
\set pos :upto
