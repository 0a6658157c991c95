-- A worker's log chunk (rung_log_put, as POST /v1/attempts/{id}/log runs it): client N appends
-- -D bytes=B of a trainer's line to attempt N+1's log, from where its last chunk ended (\gset).
\set aid :client_id + 1
\set upto :pos + :bytes
SELECT end_at AS pos FROM rung_log_put(:aid, 'bench-token', :pos, :upto, :body) \gset
