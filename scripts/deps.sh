#!/bin/sh
# Installs the Debian packages rung builds and tests with, when they are missing.
# Runs as root (apt-get) or prints the apt-get line to run when not root.
set -e
need=""
[ -f /usr/include/event2/http.h ]        || need="$need libevent-dev"
[ -f /usr/include/jansson.h ]            || need="$need libjansson-dev"
[ -f /usr/include/x86_64-linux-gnu/curl/curl.h ] || [ -f /usr/include/curl/curl.h ] || need="$need libcurl4-openssl-dev"
[ -f /usr/include/yaml.h ]               || need="$need libyaml-dev"
command -v pg_config >/dev/null 2>&1     || need="$need libpq-dev"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need="$need postgresql"
[ -z "$need" ] && exit 0
echo "deps: installing$need"
if [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq $need >/dev/null
else
  echo "deps: run as root: apt-get install -y$need" >&2
  exit 1
fi
