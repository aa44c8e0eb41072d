#!/usr/bin/env bash
# leasehold's default `serve` (embedded store) against Redis on one host, in
# one run, side by side (issue #13's table):
#   redis-benchmark -c 50 on Unix sockets: THROTTLE (one hot key, 100k random
#   keys; pipeline 1 and 16) and CL.THROTTLE (one key) against redis-server's
#   INCR with its default persistence; each row is the best of ROUNDS runs,
#   the two servers measured alternately;
#   memory: RSS growth per distinct key over KEYS keys (leasehold on the memory
#   store, redis-server INCR);
#   HTTP: wrk POST /v1/check against a bare axum handler answering the same
#   JSON (`leasehold bench http-baseline`).
# Needs redis-tools, redis-server and wrk (Debian packages; installed if missing).
# Usage: tests/bench/socket.sh [requests per run, default 200000]
# Env: ROUNDS (default 3), KEYS (default 300000), CARGO_TARGET_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
N=${1:-200000}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-300000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold/target}
for tool in redis-benchmark redis-server wrk; do
  command -v "$tool" >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools redis-server wrk; break; }
done
(cd "$ROOT" && cargo build --release -p leasehold --locked -q)
BIN="$CARGO_TARGET_DIR/release/leasehold"
DIR=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT

config() { # store-lines socket http
  cat <<TOML
[store]
$1
[server]
socket = "$2"
http = "$3"
[limits.bench]
algorithm = "token_bucket"
capacity = 1000000000
refill_per_sec = 100000000
TOML
}
wait_for() { for _ in $(seq 100); do [[ -e "$1" ]] && return; sleep 0.1; done; echo "no $1" >&2; exit 1; }
rss_kb() { awk '/VmRSS/ { print $2 }' "/proc/$1/status"; }

config "path = \"$DIR/leasehold.redb\"" "$DIR/leasehold.sock" "127.0.0.1:17071" > "$DIR/leasehold.toml"
"$BIN" serve --config "$DIR/leasehold.toml" >"$DIR/leasehold.log" 2>&1 & PIDS+=($!)
redis-server --port 0 --unixsocket "$DIR/redis.sock" --dir "$DIR" >"$DIR/redis.log" 2>&1 & PIDS+=($!)
wait_for "$DIR/leasehold.sock"; wait_for "$DIR/redis.sock"

rps() { # socket pipeline command... -> requests/s
  local sock=$1 p=$2; shift 2
  redis-benchmark -s "$sock" -n "$N" -c 50 -P "$p" -r 100000 --csv "$@" 2>/dev/null | tail -1 | awk -F'"' '{ print int($4) }'
}
best() { # socket pipeline command... -> best of ROUNDS
  local b=0 r
  for _ in $(seq "$ROUNDS"); do r=$(rps "$@"); (( r > b )) && b=$r; done
  echo "$b"
}
row() { # name goal pipeline leasehold-command -- redis-command
  local name=$1 goal=$2 p=$3; shift 3
  local ours=() theirs=()
  while [[ $1 != -- ]]; do ours+=("$1"); shift; done; shift; theirs=("$@")
  local l=0 r=0 a b
  for _ in $(seq "$ROUNDS"); do # alternate, so both see the same machine
    a=$(rps "$DIR/leasehold.sock" "$p" "${ours[@]}"); (( a > l )) && l=$a
    b=$(rps "$DIR/redis.sock" "$p" "${theirs[@]}"); (( b > r )) && r=$b
  done
  awk -v n="$name" -v p="$p" -v l="$l" -v r="$r" -v g="$goal" \
    'BEGIN { printf "| %-40s | %2s | %10d | %10d | %5.2f× | %s |\n", n, p, l, r, l / r, g }'
}
echo "| case (50 clients, Unix sockets)          |  P | leasehold/s |   Redis/s | ratio | goal |"
echo "|------------------------------------------|----|------------|------------|-------|------|"
row "THROTTLE one key vs INCR" "≥ 0.9×" 1 THROTTLE bench hot -- INCR hot
row "THROTTLE one key vs INCR" "≥ 0.9×" 16 THROTTLE bench hot -- INCR hot
row "THROTTLE 100k random keys vs INCR" "≥ 0.5×" 1 THROTTLE bench key:__rand_int__ -- INCR key:__rand_int__
row "THROTTLE 100k random keys vs INCR" "≥ 0.5×" 16 THROTTLE bench key:__rand_int__ -- INCR key:__rand_int__
row "CL.THROTTLE one key vs INCR" "≥ 0.9×" 1 CL.THROTTLE hot 1000000 100000000 1 -- INCR hot
row "CL.THROTTLE one key vs INCR" "≥ 0.9×" 16 CL.THROTTLE hot 1000000 100000000 1 -- INCR hot

# Memory per key: fresh servers, RSS before and after KEYS distinct keys.
config 'kind = "memory"' "$DIR/mem.sock" "127.0.0.1:17072" > "$DIR/mem.toml"
"$BIN" serve --config "$DIR/mem.toml" >"$DIR/mem.log" 2>&1 & MEM=$!; PIDS+=($MEM)
redis-server --port 0 --unixsocket "$DIR/redis2.sock" --dir "$DIR" --save "" >"$DIR/redis2.log" 2>&1 & RED=$!; PIDS+=($RED)
wait_for "$DIR/mem.sock"; wait_for "$DIR/redis2.sock"
per_key() { # pid socket command...
  local pid=$1 sock=$2; shift 2
  local before after
  before=$(rss_kb "$pid")
  python3 "$ROOT/tests/bench/keys.py" "$sock" "$KEYS" "$@"
  after=$(rss_kb "$pid")
  echo $(( (after - before) * 1024 / KEYS ))
}
ml=$(per_key "$MEM" "$DIR/mem.sock" THROTTLE bench)
mr=$(per_key "$RED" "$DIR/redis2.sock" INCR)
echo
echo "| memory per tracked key (RSS growth over $KEYS keys) | leasehold (memory store) | Redis INCR | goal |"
echo "|---|---:|---:|---|"
echo "| bytes per key | $ml | $mr | ≤ 256 |"

# HTTP: the daemon's POST /v1/check against a bare axum handler.
"$BIN" bench http-baseline --listen 127.0.0.1:17079 >"$DIR/baseline.log" 2>&1 & PIDS+=($!)
sleep 0.5
cat > "$DIR/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"limit":"bench","key":"hot"}'
wrk.headers["Content-Type"] = "application/json"
LUA
http_rps() { wrk -t2 -c50 -d5s -s "$DIR/post.lua" "$1" | awk '/Requests\/sec/ { print int($2) }'; }
hl=0; hb=0
for _ in $(seq "$ROUNDS"); do
  a=$(http_rps http://127.0.0.1:17071/v1/check); (( a > hl )) && hl=$a
  b=$(http_rps http://127.0.0.1:17079/v1/check); (( b > hb )) && hb=$b
done
echo
echo "| HTTP POST /v1/check (wrk -t2 -c50, one key) | leasehold/s | bare axum/s | ratio |"
echo "|---|---:|---:|---:|"
awk -v l="$hl" -v b="$hb" 'BEGIN { printf "| requests per second | %d | %d | %.2f× |\n", l, b, l / b }'
echo
echo "($(nproc) cores, $(uname -m); best of $ROUNDS runs of $N requests each; redis-benchmark and wrk share the cores)"
