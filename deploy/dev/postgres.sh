#!/usr/bin/env bash
# Prepares the local Postgres that `make run` and `make test` use, on a fresh
# machine or an already prepared one (idempotent):
#   - installs PostgreSQL with apt when no cluster exists,
#   - starts the cluster when it is down and waits until it accepts connections,
#   - creates role inboxd (password inboxd, CREATEDB: tests create one
#     database per test package) and database inboxd.
# Needs root or sudo for the first two steps.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }

if ! command -v pg_lsclusters >/dev/null 2>&1 || [ -z "$(pg_lsclusters -h 2>/dev/null)" ]; then
  echo "postgres.sh: no PostgreSQL cluster found; installing postgresql with apt" >&2
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
fi

# The cluster on the port the tests and `make run` use (5432, or the port of
# INBOXD_TEST_DATABASE_URL when set); a machine may have other clusters, and
# pg_lsclusters sorts them by name, not by port.
want_port=5432
if [ -n "${INBOXD_TEST_DATABASE_URL:-}" ]; then
  p=$(printf '%s' "$INBOXD_TEST_DATABASE_URL" | sed -nE 's#^[a-z]+://[^/]*:([0-9]+)/.*#\1#p')
  [ -n "$p" ] && want_port=$p
fi
line=$(pg_lsclusters -h | awk -v p="$want_port" '$3 == p' | head -n 1)
if [ -z "$line" ]; then
  line=$(pg_lsclusters -h | head -n 1)
  echo "postgres.sh: no cluster on port $want_port; using the first one: $line" >&2
fi
read -r ver cluster port status _ <<<"$line"
if [ "$status" != "online" ]; then
  echo "postgres.sh: starting cluster $ver/$cluster on port $port" >&2
  as_root pg_ctlcluster "$ver" "$cluster" start
fi
for _ in $(seq 1 60); do
  pg_isready -q -h 127.0.0.1 -p "$port" && break
  sleep 0.5
done
pg_isready -h 127.0.0.1 -p "$port" >/dev/null || { echo "postgres.sh: cluster $ver/$cluster does not accept connections on 127.0.0.1:$port" >&2; exit 1; }

as_postgres psql -q -p "$port" -v ON_ERROR_STOP=1 <<'SQL'
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'inboxd') THEN
    CREATE ROLE inboxd LOGIN PASSWORD 'inboxd' CREATEDB;
  END IF;
END
$$;
SQL
if ! as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = 'inboxd'" | grep -q 1; then
  as_postgres createdb -p "$port" -O inboxd inboxd
fi
echo "postgres.sh: ready: postgres://inboxd:inboxd@127.0.0.1:$port/inboxd?sslmode=disable" >&2
