#!/usr/bin/env bash
# The hook's client table: unmodified C client libraries, 200 calls from 200
# fibers of one thread, against real servers (tests/hook_clients.rs, which
# starts its own PostgreSQL and a delaying HTTP server). Prints the table the
# README quotes: calls, wall time of all, one call alone, the ticker fiber's
# longest gap (a gap as long as one call would mean the thread blocked).
#
#   bash benches/peers/hook_clients.sh
#
# Needs: apt-get install postgresql libpq-dev libcurl4-openssl-dev
# mariadb-server openssh-server libssl-dev; a test whose server is missing says
# SKIPPED and has no row.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(cargo test --release --quiet --features hook --test hook_clients -- \
    --nocapture --test-threads=1 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep SKIPPED || true
echo "| client | calls | all | one alone | longest ticker gap |"
echo "|---|---|---|---|---|"
echo "$out" | sed -n 's/.*CLIENT-ROW //p'
