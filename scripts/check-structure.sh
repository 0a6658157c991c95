#!/bin/sh
# The tree's structure rules (docs/DESIGN.md, "Map"), checked by `make test` (tests/run.sh) and
# printed as TAP-like `ok - ` / `not ok - ` lines; exits 1 when one fails:
#   1. no include circle and no call circle among the modules of server/ and recovery/ (a module is
#      x.c with x.h; includes are read from the sources, calls from the objects under build/);
#   2. recovery/ includes nothing from server/, worker/ or cli/, and no libevent, libpq or curl header;
#   3. every SQL function (and procedure) has exactly one CREATE in the tree's .sql files, under
#      sql/functions/, and triggers and views are created there too (migrations hold only schema);
#   4. no SQL under sql/ NOTIFYs but sql/jobs_notify.sql, which rungd runs after a commit (lease_announce):
#      Postgres commits notifying transactions one at a time, WAL flush included.
# Usage: scripts/check-structure.sh [ROOT]   (ROOT: the repository, default this script's parent)
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rung-structure.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
failed=0
ok() { echo "ok - structure: $1"; }
bad() { echo "not ok - structure: $1"; failed=1; }

# --- 1a. includes: "module includer -> module included", for included headers of server/ and recovery/
# (a module's name is its folder and file stem: server/auth for server/auth.c and server/auth.h) ---
known=$(ls server/*.h recovery/*.h common/*.h build/*.h 2>/dev/null | tr '\n' ' ')
awk -v known="$known" '
	BEGIN { n = split(known, k, " "); for (i = 1; i <= n; i++) have[k[i]] = 1 }
	function module(p) { sub(/\.[ch]$/, "", p); return p }
	function norm(p,    parts, n, i, out, m) {
		n = split(p, parts, "/"); m = 0
		for (i = 1; i <= n; i++) {
			if (parts[i] == "." || parts[i] == "") continue
			if (parts[i] == ".." && m > 0) { m--; continue }
			out[++m] = parts[i]
		}
		p = ""; for (i = 1; i <= m; i++) p = p (i > 1 ? "/" : "") out[i]
		return p
	}
	/^[ \t]*#[ \t]*include[ \t]*"/ {
		inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
		dir = FILENAME; sub(/\/[^\/]*$/, "", dir)
		target = ""
		if (inc ~ /\//) target = norm(dir "/" inc)
		else if ((dir "/" inc) in have) target = dir "/" inc
		else if (("common/" inc) in have) target = "common/" inc
		else if (("recovery/" inc) in have) target = "recovery/" inc
		if (target !~ /^(server|recovery)\/[^\/]*\.h$/) next
		if (module(target) != module(FILENAME)) print module(FILENAME), module(target)
	}' server/*.[ch] recovery/*.[ch] | sort -u >"$TMP/includes"

# A circle in a "from to" edge list, printed as "a -> b -> ... -> a"; nothing when there is none.
circle() {
	awk '
	{ out[$1] = out[$1] " " $2; nodes[$1] = 1; nodes[$2] = 1 }
	function dfs(n,    k, m, list, i, s) {
		state[n] = 1; stack[++depth] = n
		split(out[n], list, " ")
		for (k in list) {
			m = list[k]
			if (state[m] == 1) {
				s = m
				for (i = depth; i >= 1 && stack[i] != m; i--) ;
				for (i = i + 1; i <= depth; i++) s = s " -> " stack[i]
				print s " -> " m; found = 1; exit
			}
			if (!state[m]) dfs(m)
			if (found) return
		}
		state[n] = 2; depth--
	}
	END { for (n in nodes) if (!state[n] && !found) dfs(n) }' "$1"
}

c=$(circle "$TMP/includes")
if [ ! -s "$TMP/includes" ]; then bad "no module includes read from server/ and recovery/"
elif [ -z "$c" ]; then ok "no include circle among server/ and recovery/ ($(wc -l <"$TMP/includes") module includes)"
else bad "include circle: $c"; fi

# --- 1b. calls: a module calls another when its object uses a symbol the other's object defines ---
objs=$(ls build/server/*.o build/recovery/*.o 2>/dev/null)
if [ -z "$objs" ]; then
	bad "no objects under build/server and build/recovery to read the calls from (run make first)"
else
	# shellcheck disable=SC2086
	nm -A $objs | awk '{ m = $0; sub(/\.o:.*/, "", m); sub(/^build\//, "", m)
		sub(/^[^:]*\.o:[0-9a-fA-F]*[ \t]*/, "")
		if ($1 == "U") print "U", $2, m; else if ($1 ~ /^[TDBR]$/) print "D", $2, m }' >"$TMP/syms"
	awk '$1 == "D" { def[$2] = $3 } $1 == "U" { use[NR] = $3 " " $2 }
	     END { for (k in use) { split(use[k], a, " "); if ((a[2] in def) && def[a[2]] != a[1]) print a[1], def[a[2]] } }' \
		"$TMP/syms" | sort -u >"$TMP/calls"
	c=$(circle "$TMP/calls")
	if [ ! -s "$TMP/calls" ]; then bad "no module calls read from the objects (nm)"
	elif [ -z "$c" ]; then ok "no call circle among server/ and recovery/ ($(wc -l <"$TMP/calls") module calls)"
	else bad "call circle: $c"; fi
fi

# --- 2. recovery/ is pure ---
known=$(ls recovery/*.h common/*.h 2>/dev/null | tr '\n' ' ')
awk -v known="$known" '
	BEGIN { n = split(known, k, " "); for (i = 1; i <= n; i++) { sub(/^[^\/]*\//, "", k[i]); have[k[i]] = 1 } }
	/^[ \t]*#[ \t]*include/ {
		if ($0 ~ /[<"](\.\.\/)*(server|worker|cli)\// || $0 ~ /[<"](event2?\/|event\.h|evhttp\.h|libpq|postgres|curl\/)/) {
			print FILENAME ":" FNR ": " $0; next }
		if ($0 ~ /"/) { inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
			if (!(inc in have)) print FILENAME ":" FNR ": \"" inc "\" is not in recovery/ or common/" }
	}' recovery/*.[ch] >"$TMP/recovery"
if [ -s "$TMP/recovery" ]; then bad "recovery/ includes what it must not: $(tr '\n' ';' <"$TMP/recovery")"
else ok "recovery/ includes nothing from server/, worker/, cli/, libevent, libpq or curl"; fi

# --- 3. one CREATE per function, under sql/functions/ ---
git ls-files --cached --others --exclude-standard '*.sql' 2>/dev/null | grep -v '^tests/data/' >"$TMP/sqlfiles" || find . -name '*.sql' -not -path './tests/data/*' -not -path './build/*' | sed 's|^\./||' >"$TMP/sqlfiles"
# shellcheck disable=SC2046
awk '{ line = tolower($0); sub(/--.*/, "", line)
	while (match(line, /create[ \t]+(or[ \t]+replace[ \t]+)?(function|procedure|trigger|view|materialized[ \t]+view)[ \t]+[a-z0-9_."]+/)) {
		m = substr(line, RSTART, RLENGTH); line = substr(line, RSTART + RLENGTH)
		n = split(m, w, /[ \t]+/); print w[n], w[n - 1], FILENAME
	} }' $(cat "$TMP/sqlfiles") /dev/null | sort >"$TMP/creates"
dups=$(awk '$2 == "function" || $2 == "procedure" { n[$1]++; w[$1] = w[$1] " " $3 } END { for (k in n) if (n[k] > 1) print k ":" w[k] }' "$TMP/creates")
nfun=$(awk '$2 == "function" || $2 == "procedure"' "$TMP/creates" | wc -l)
if [ -n "$dups" ]; then bad "functions created more than once: $(echo "$dups" | tr '\n' ';')"
elif [ "$nfun" -eq 0 ]; then bad "no CREATE FUNCTION found in the tree's .sql files"
else ok "each of the $nfun functions has exactly one CREATE"; fi
outside=$(awk '$3 !~ /^sql\/functions\// { print $2 " " $1 " in " $3 }' "$TMP/creates")
if [ -n "$outside" ]; then bad "functions, triggers or views created outside sql/functions/: $(echo "$outside" | tr '\n' ';')"
else ok "functions, triggers and views are created only under sql/functions/"; fi

# --- 4. NOTIFY only from sql/jobs_notify.sql ---
notifying=$(for f in sql/*.sql sql/functions/*.sql; do
	[ "$f" = sql/jobs_notify.sql ] && continue
	sed 's/--.*//' "$f" | grep -qiE 'pg_notify|(^|[^a-z_])notify[ \t]+[a-z_"]' && echo "$f"
done)
if [ -n "$notifying" ]; then bad "NOTIFY inside a statement that writes (only sql/jobs_notify.sql may): $(echo "$notifying" | tr '\n' ' ')"
elif ! grep -qs pg_notify sql/jobs_notify.sql; then bad "sql/jobs_notify.sql does not NOTIFY"
else ok "only sql/jobs_notify.sql NOTIFYs, after the commit of what it announces"; fi

exit $failed
