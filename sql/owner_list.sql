-- -> {"owners": [{"owner", "queued", "running", "scheduled", "max_running"}]}, the busiest first (rung_owners_summary,
-- sql/functions/40_claim.sql)
SELECT jsonb_build_object('owners', rung_owners_summary());
