-- One GPU's claim (rung_claim, the round's fallback for a GPU that may run none of its candidates), rolled back.
BEGIN;
SELECT rung_claim(w.id, 'G-1', 30, NULL) FROM workers w WHERE w.name = 'bench-w';
ROLLBACK;
