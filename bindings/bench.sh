#!/usr/bin/env bash
# ns per in-process `check` from each language, beside the language's common
# peer measured in the same run: Node (leasehold-node napi addon, leasehold-wasm
# in Node, rate-limiter-flexible RateLimiterMemory) and Python
# (leasehold-python, `limits` MemoryStorage fixed and moving window), each
# with its ratio to the peer and the goal of issue #19 where it has one;
# Python's rows split the cost (wrapper, bare ctypes call, uniffi's path).
# 1000 keys round-robin, a limit that admits every check. Best of 5 runs.
# Not run by CI. Builds release bindings first (as run-tests.sh does).
#
# Env: BENCH_N (checks per run; Node default 300000, Python 100000),
#      CARGO_TARGET_DIR, VENV (as run-tests.sh).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/leasehold
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/target}
export VENV=${VENV:-$CACHE/venv}
LIMITS_VERSION=5.8.0

# Build and install the bindings (and run nothing else).
LEASEHOLD_BINDINGS="none" "$HERE/run-tests.sh" >/dev/null
bash "$HERE/node/build.sh" >/dev/null 2>&1
bash "$HERE/wasm/build.sh" >/dev/null 2>&1
DIST=$(mktemp -d "${TMPDIR:-/tmp}/leasehold-wheel.XXXXXX")
trap 'rm -rf "$DIST"' EXIT
(cd "$HERE/python" && PATH="$VENV/bin:$PATH" "$VENV/bin/maturin" build --release --locked -q -o "$DIST" >/dev/null 2>&1)
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$DIST"/leasehold_python-*.whl
"$VENV/bin/python" -m pip show limits 2>/dev/null | grep -qx "Version: $LIMITS_VERSION" \
  || "$VENV/bin/python" -m pip install -q "limits==$LIMITS_VERSION"
[[ -d "$HERE/node/node_modules/rate-limiter-flexible" ]] || (cd "$HERE/node" && npm ci --no-audit --no-fund --loglevel=error)

results=$( { node "$HERE/bench/node.js"; (cd "$HERE/bench" && "$VENV/bin/python" python.py); } )
echo
echo "| language | implementation | ns per check | × peer | goal |"
echo "|---|---|---:|---:|---|"
# Ratios are to the language's peer row (rate-limiter-flexible; limits'
# fixed window), measured in this same run.
printf '%s\n' "$results" | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    const rows = s.trim().split("\n").map((line) => JSON.parse(line));
    for (const r of rows) {
      const peer = rows.find((p) => p.lang === r.lang && p.role === "peer");
      const ratio = peer ? r.ns / peer.ns : NaN;
      const x = r.role === "peer" ? "1 (peer)" : Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : "";
      const goal = r.goal === undefined ? "" : `≤ ${r.goal.toFixed(1)}×: ${ratio <= r.goal ? "met" : "NOT met"}`;
      console.log(`| ${r.lang} | ${r.impl} | ${r.ns.toLocaleString("en-US")} | ${x} | ${goal} |`);
    }
  });'
echo
echo "($(nproc) cores, $(uname -m); 1000 keys round-robin, every check admitted; best of 5)"
