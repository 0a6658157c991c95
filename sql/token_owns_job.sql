-- $1 job id, $2 token name -> owned? (no row when the job is missing)
SELECT owner = $2 FROM jobs WHERE id = $1::bigint;
