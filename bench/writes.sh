#!/usr/bin/env bash
# What Postgres wrote during one timed window of `make bench`, per unit (attempt, job, decision): counted
# exactly from the WAL records of the window (pg_waldump), not estimated. rung-bench runs it around each window
# (--hook): `writes.sh begin` before, `writes.sh end UNITS` after; `end` prints one JSON object of per-unit
# metrics on stdout (merged into the run's line) and the per-table breakdown on stderr.
# Env (scripts/bench.sh sets it): PGBIN, PG_PORT, DB, PG_DIR (the cluster's data directory), WRITES_STATE (a file).
set -u
cmd=${1:-}
PSQL() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" "$@"; }
SLOT=rung_bench_writes

case "$cmd" in
begin)
	# A slot keeps the window's WAL from being recycled by a checkpoint before pg_waldump reads it.
	PSQL -c "SELECT pg_drop_replication_slot('$SLOT') FROM pg_replication_slots WHERE slot_name = '$SLOT'" >/dev/null
	PSQL -c "SELECT pg_create_physical_replication_slot('$SLOT', true)" >/dev/null || exit 1
	PSQL -c "SELECT pg_current_wal_insert_lsn()" >"$WRITES_STATE" || exit 1
	;;
end)
	units=${2:-0}
	start=$(cat "$WRITES_STATE")
	stop=$(PSQL -c "SELECT pg_current_wal_flush_lsn()") || exit 1
	wal_bytes=$(PSQL -c "SELECT pg_wal_lsn_diff('$stop', '$start')::bigint")
	# relfilenode -> "table" or "table.index" (indexes named by their table), for this database
	# relfilenode -> "table" or "table:index" (an index named by its table; TOAST by its owner: "jobs(toast)")
	map=$(PSQL -F ' ' -c "WITH n AS (SELECT c.oid, coalesce((SELECT o.relname || '(toast)' FROM pg_class o
			WHERE o.reltoastrelid = c.oid), c.relname) AS name FROM pg_class c WHERE c.relkind IN ('r', 't'))
		SELECT pg_relation_filenode(c.oid), coalesce(tn.name || ':' || c.relname, n.name)
		FROM pg_class c LEFT JOIN n ON n.oid = c.oid LEFT JOIN pg_index i ON i.indexrelid = c.oid
		LEFT JOIN n tn ON tn.oid = i.indrelid
		WHERE c.relkind IN ('r', 'i', 't') AND pg_relation_filenode(c.oid) IS NOT NULL")
	dboid=$(PSQL -c "SELECT oid FROM pg_database WHERE datname = current_database()")
	"$PGBIN/pg_waldump" -p "$PG_DIR/pg_wal" -s "$start" -e "$stop" 2>/dev/null |
		awk -v units="$units" -v wal="$wal_bytes" -v dboid="$dboid" -v map="$map" '
		BEGIN {
			n = split(map, m, "\n")
			for (i = 1; i <= n; i++) { split(m[i], f, " "); name[f[1]] = f[2] }
		}
		{
			rmgr = $2
			d = index($0, "desc: "); if (!d) next
			rest = substr($0, d + 6); split(rest, w, " "); op = w[1]
			sub(/\+INIT$/, "", op)
			if (rmgr == "Transaction" && op == "COMMIT") { commits++; next }
			r = match($0, /rel [0-9]+\/[0-9]+\/[0-9]+/); if (!r) next
			split(substr($0, RSTART + 4, RLENGTH - 4), rel, "/")
			if (rel[2] != dboid) next
			nm = (rel[3] in name) ? name[rel[3]] : "rel" rel[3]
			tbl = nm; sub(/:.*/, "", tbl)
			if (rmgr == "Heap") {
				if (op == "INSERT") { ins[tbl]++; tins++ }
				else if (op == "UPDATE") { upd[tbl]++; tupd++ }
				else if (op == "HOT_UPDATE") { hot[tbl]++; thot++; tupd++ }
				else if (op == "DELETE") { del[tbl]++; tdel++ }
				else if (op == "LOCK") { lck[tbl]++; tlck++ }
			} else if (rmgr == "Btree") {
				# an index entry is written by INSERT_LEAF or INSERT_POST, or inside a leaf page split
				if (op == "INSERT_LEAF" || op == "INSERT_POST" || ((op == "SPLIT_L" || op == "SPLIT_R") && rest ~ /level: 0|level 0/)) {
					idx[tbl]++; tidx++; seen[tbl] = 1
				}
			}
			if (rmgr == "Heap" || rmgr == "Btree") seen[tbl] = 1
		}
		END {
			u = units > 0 ? units : 1
			printf "{\"rows_inserted\": %.3f, \"rows_updated\": %.3f, \"hot_pct\": %.1f, \"index_entries\": %.3f, \"row_locks\": %.3f, \"rows_deleted\": %.3f, \"commits\": %.3f, \"wal_kb\": %.2f}\n",
				tins / u, tupd / u, tupd ? 100 * thot / tupd : 0, tidx / u, tlck / u, tdel / u, commits / u, wal / 1024 / u
			printf "writes per unit over %d units (WAL records): table: inserted updated(HOT) locked deleted index-entries\n", units > "/dev/stderr"
			for (t in seen)
				printf "  %-14s %6.2f %6.2f(%5.2f) %6.2f %6.2f %6.2f\n", t, ins[t] / u, (upd[t] + hot[t]) / u, hot[t] / u, lck[t] / u, del[t] / u, idx[t] / u > "/dev/stderr"
		}'
	PSQL -c "SELECT pg_drop_replication_slot('$SLOT')" >/dev/null
	;;
*) echo "usage: writes.sh begin | end UNITS" >&2; exit 2 ;;
esac
