#!/usr/bin/env bash
# Socket and HTTP throughput, with Redis as the yardstick in the same run:
#   redis-benchmark: THROTTLE on one key and on 100k random keys, pipeline 1
#   and 16, 50 clients, against leasehold's socket; INCR the same way against
#   redis-server's own Unix socket. wrk: POST /v1/check.
# Needs redis-tools, redis-server and wrk (Debian packages; installed if missing).
# Usage: tests/bench/socket.sh [requests per run, default 200000]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
N=${1:-200000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold/target}
for tool in redis-benchmark redis-server wrk; do
  command -v "$tool" >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools redis-server wrk; break; }
done
(cd "$ROOT" && cargo build --release -p leasehold --locked -q)
DIR=$(mktemp -d)
trap 'kill $LH $RS 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT
cat > "$DIR/leasehold.toml" <<TOML
[store]
path = "$DIR/leasehold.redb"
[server]
socket = "$DIR/leasehold.sock"
http = "127.0.0.1:17071"
[limits.bench]
algorithm = "token_bucket"
capacity = 1000000000
refill_per_sec = 100000000
lease_max = 100000
TOML
"$CARGO_TARGET_DIR/release/leasehold" serve --config "$DIR/leasehold.toml" >"$DIR/leasehold.log" 2>&1 & LH=$!
redis-server --port 0 --unixsocket "$DIR/redis.sock" --save "" --appendonly no >"$DIR/redis.log" 2>&1 & RS=$!
for _ in $(seq 50); do [[ -S "$DIR/leasehold.sock" && -S "$DIR/redis.sock" ]] && break; sleep 0.1; done

run() { # name socket pipeline command...
  local name=$1 sock=$2 p=$3; shift 3
  redis-benchmark -s "$sock" -n "$N" -c 50 -P "$p" -r 100000 --csv "$@" 2>/dev/null | tail -1 \
    | awk -F'"' -v n="$name" -v p="$p" '{ printf "| %-34s | %2s | %10.0f | %6s | %6s |\n", n, p, $4, $10, $14 }'
}
echo "| command (50 clients)               |  P | requests/s | p50 ms | p99 ms |"
echo "|------------------------------------|----|------------|--------|--------|"
for p in 1 16; do
  run "leasehold THROTTLE, one key" "$DIR/leasehold.sock" $p THROTTLE bench hot
  run "redis-server INCR, one key" "$DIR/redis.sock" $p INCR hot
  run "leasehold THROTTLE, 100k random keys" "$DIR/leasehold.sock" $p THROTTLE bench key:__rand_int__
  run "redis-server INCR, 100k random keys" "$DIR/redis.sock" $p INCR key:__rand_int__
done
cat > "$DIR/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"limit":"bench","key":"hot"}'
wrk.headers["Content-Type"] = "application/json"
LUA
echo
echo "HTTP: wrk -t2 -c50 -d10s POST /v1/check (one key)"
wrk -t2 -c50 -d10s --latency -s "$DIR/post.lua" http://127.0.0.1:17071/v1/check | grep -E "Requests/sec|50%|99%"
