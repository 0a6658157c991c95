-- One GPU's claim (rung_claim, the round's fallback for a GPU that may run none of its candidates; -D
-- fair=true: with the running counts a fair share passes), rolled back. rung_claim_in with the pool
-- the round would reach it in: the first it borrows from when it borrows (capped.sh's "borrowing"), else
-- its own.
BEGIN;
SELECT rung_claim_in(coalesce(w.borrow[1], w.pool), w.id, 'G-1', 30, NULL, NULL,
                     CASE WHEN :fair THEN rung_owners_running() END, '{}') FROM workers w
WHERE w.name = 'bench-w';
ROLLBACK;
