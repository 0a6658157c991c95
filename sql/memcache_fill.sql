-- $1 arch, $2 GPU memory MiB -> the OBSERVATIONs rungd's profile cache fits (server/memcache.c): the
-- newest of (arch, memory class), as a finish's CTX carries them (no job of its own); and the fleet's
-- largest usable GPU memory (rung_fleet_max_gpu_mib, as the finish CTX counts it), for
-- policy_initial's requeue_bigger at a lease. Read here, once per fill, rather than in the claim
-- round: a lease needs it only when a profile is cached, and profiles come only from fills; the claim
-- round stays as it was.
SELECT rung_memory_ctx_observations($1::text, $2::int, NULL), rung_fleet_max_gpu_mib();
