#!/bin/sh
# A throwaway PostgreSQL for tests and `make run`: data in DIR, TCP on 127.0.0.1:PORT, trust auth.
#   tests/pg.sh start DIR PORT   initdb when DIR is new, start, wait until it accepts connections
#   tests/pg.sh stop DIR [fast|immediate]
#   tests/pg.sh restart DIR [fast|immediate]
#   tests/pg.sh url PORT [DB]    prints the libpq URL
# Postgres refuses to run as root, so as root the cluster runs as the `postgres` user.
set -e
cmd=$1; dir=$2
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bindir" ] || { echo "pg.sh: no PostgreSQL server found (apt-get install postgresql)" >&2; exit 1; }
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$cmd" in
start)
  port=$3
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$dir"
    # postgres must be able to reach DIR: every parent needs o+x.
    d=$(cd "$dir" && pwd); while [ "$d" != / ]; do d=$(dirname "$d"); chmod o+x "$d" 2>/dev/null || true; done
  fi
  if [ ! -f "$dir/PG_VERSION" ]; then
    as_pg "$bindir/initdb" -D "$dir" -A trust -U postgres --no-sync -E UTF8 --locale=C.UTF-8 >"$dir.initdb.log" 2>&1 ||
      { cat "$dir.initdb.log" >&2; exit 1; }
  fi
  as_pg "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -k '' -c max_connections=200 -c fsync=${RUNG_PG_FSYNC:-on} -c shared_buffers=128MB ${RUNG_PG_OPTS:-}" start >/dev/null
  ;;
stop)
  as_pg "$bindir/pg_ctl" -D "$dir" -m "${3:-fast}" -w -t 60 stop >/dev/null 2>&1 || true
  ;;
restart)
  as_pg "$bindir/pg_ctl" -D "$dir" -m "${3:-fast}" -w -t 60 restart >/dev/null
  ;;
url)
  echo "postgresql://postgres@127.0.0.1:$dir/${3:-postgres}"
  ;;
*) echo "usage: pg.sh start DIR PORT | stop DIR [mode] | restart DIR [mode] | url PORT [DB]" >&2; exit 2 ;;
esac
