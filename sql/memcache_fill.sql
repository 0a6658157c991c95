-- $1 arch, $2 GPU memory MiB -> the OBSERVATIONs rungd's profile cache fits (server/memcache.c): the
-- newest of (arch, memory class), as a finish's CTX carries them (no job of its own)
SELECT rung_memory_ctx_observations($1::text, $2::int, NULL);
