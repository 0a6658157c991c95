-- GET /v1/pools (rungctl pools) -> {"pools": [POOL]} (rung_pools_json, sql/functions/85_gpus.sql)
SELECT jsonb_build_object('pools', rung_pools_json());
