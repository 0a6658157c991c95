-- liveness of the database
SELECT 1;
