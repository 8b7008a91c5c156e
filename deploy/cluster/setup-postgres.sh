#!/usr/bin/env bash
# Creates Temporal's two databases and their schemas with Temporal's own
# SQL tool (built by `task build:cluster` from the server mlrb pins), as
# the role named in temporal.env (it needs CREATEDB). Safe to run again:
# existing databases are kept and their schemas brought up to date.
#   PGHOST=db.internal PGPORT=5432 PGUSER=temporal PGPASSWORD=… deploy/cluster/setup-postgres.sh [temporal-sql-tool]
set -euo pipefail
tool=${1:-temporal-sql-tool}
sql() { "$tool" --ep "${PGHOST:-127.0.0.1}" -p "${PGPORT:-5432}" -u "${PGUSER:-temporal}" --pw "${PGPASSWORD:?set PGPASSWORD}" --pl postgres12 --db "$@"; }
for db in temporal:temporal temporal_visibility:visibility; do
  name=${db%%:*} schema=${db##*:}
  sql "$name" create-database 2>/dev/null || true # already there
  if sql "$name" setup-schema -v 0.0 2>/dev/null; then :; fi # a fresh database gets the version table
  sql "$name" update-schema --schema-name "postgresql/v12/$schema"
done
