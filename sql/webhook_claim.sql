-- The delivery loop claims up to $1 due, undelivered outbox rows of the kinds in $3 (text[]: the
-- URLs this replica has: 'escalation', and 'job' and 'quota' for the job URL) for $2 seconds (longer than one POST may take);
-- SKIP LOCKED plus the claim deadline keep two replicas off the same row.
-- Returns id, attempts (this try's number), the payload text and the kind.
UPDATE webhook_outbox o
SET claimed_until = now() + make_interval(secs => $2::int), attempts = o.attempts + 1
FROM (SELECT id FROM webhook_outbox
      WHERE delivered_at IS NULL AND next_attempt_at <= now()
        AND (claimed_until IS NULL OR claimed_until < now())
        AND kind = ANY ($3::text[])
      ORDER BY next_attempt_at, id
      LIMIT $1::int
      FOR UPDATE SKIP LOCKED) due
WHERE o.id = due.id
RETURNING o.id, o.attempts, o.payload::text, o.kind
