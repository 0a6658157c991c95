-- $1 the payload naming the sending rungd (its own wake-ups are not wake-ups to it) -> one row.
-- Wakes every replica's parked lease waiters after a statement that queued work has committed
-- (server/lease.c lease_announce). A transaction of its own: it writes no WAL, so its commit is not
-- flushed, and the lock Postgres takes for a NOTIFY until the end of commit is held for moments.
SELECT pg_notify('rung_jobs', $1);
