#!/usr/bin/env bash
# The one test command: everything CI checks, installing what it needs on a
# fresh machine (registries only). Run from anywhere: `tests/run.sh`.
#
# Env:
#   CARGO_TARGET_DIR  build cache (default: ~/.cache/leasehold/target, outside the
#                     clone so fresh clones build incrementally; nothing depends on it)
#   LEASEHOLD_SKIP    space-separated stages to skip (lint dynamodb unit browser bindings wasm fuzz)
#   LEASEHOLD_DYNAMODB_ENDPOINT  use this DynamoDB-API server instead of starting DynamoDB Local
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED_TOOLS=${SHARED_TOOLS:-$ROOT/../shared/tools}
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold/target}
export CARGO_TERM_COLOR=never
mkdir -p "$CARGO_TARGET_DIR"

stage() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }
skip() { [[ " ${LEASEHOLD_SKIP:-} " == *" $1 "* ]]; }

if ! skip lint; then
  stage "format and lints"
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
  cargo fmt --all -- --check
  cargo clippy --workspace --all-targets --locked -- -D warnings
fi

RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leasehold-run.XXXXXX")
cleanup() {
  [[ -f "$RUN_DIR/ddb.pid" ]] && "$SHARED_TOOLS/dynamodb-local.sh" --stop "$RUN_DIR/ddb.pid" >/dev/null 2>&1 || true
  rm -rf "$RUN_DIR"
}
trap cleanup EXIT

# A real DynamoDB API on loopback (AWS's DynamoDB Local) for the store tests,
# unless the caller points at one already.
if ! skip dynamodb && [[ -z "${LEASEHOLD_DYNAMODB_ENDPOINT:-}" ]]; then
  stage "DynamoDB Local"
  port=$(( 20000 + RANDOM % 20000 ))
  LEASEHOLD_DYNAMODB_ENDPOINT=$("$SHARED_TOOLS/dynamodb-local.sh" "$port" "$RUN_DIR/ddb.pid" | tail -1)
  export LEASEHOLD_DYNAMODB_ENDPOINT
fi
if ! skip dynamodb; then
  export LEASEHOLD_REQUIRE_DYNAMODB=1   # a DynamoDB test that cannot reach it fails, never skips
fi

if ! skip unit; then
  stage "unit, property and integration tests"
  cargo test --workspace --locked
fi

if ! skip browser; then
  stage "dashboard in headless Chromium"
  if [[ ! -x /usr/bin/chromium ]]; then
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
  fi
  # The binary the page is served from: the one the test stage built, if any.
  [[ -x "$CARGO_TARGET_DIR/debug/leasehold" ]] || cargo test --workspace --locked --no-run
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error && LEASEHOLD_BIN="$CARGO_TARGET_DIR/debug/leasehold" node --test)
  echo "screenshot: target/dashboard.png"
fi

if ! skip bindings; then
  stage "bindings: Node (napi), Python (uniffi), wasm (Node and Chromium)"
  # The socket clients are also tested against the real daemon binary.
  [[ -x "$CARGO_TARGET_DIR/debug/leasehold" ]] || cargo test --workspace --locked --no-run
  LEASEHOLD_BIN="$CARGO_TARGET_DIR/debug/leasehold" bash bindings/run-tests.sh
fi

if ! skip wasm; then
  stage "leasehold-core builds for wasm32-unknown-unknown"
  rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
    || rustup target add wasm32-unknown-unknown
  cargo build -p leasehold-core --target wasm32-unknown-unknown --release --locked
fi

if ! skip fuzz; then
  stage "fuzzing: RESP decoder, config, HTTP bodies (libFuzzer, 20 s each)"
  # Its own build cache: the fuzz crate's instrumented flags differ from the workspace's.
  CARGO_TARGET_DIR="$CARGO_TARGET_DIR/fuzz" bash tests/fuzz.sh
fi

stage "all green"
