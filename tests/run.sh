#!/usr/bin/env bash
# The one test command: everything CI checks, installing what it needs on a
# fresh machine (registries only). Run from anywhere: `tests/run.sh`.
#
# Env:
#   CARGO_TARGET_DIR  build cache (default: ~/.cache/leasehold/target, outside the
#                     clone so fresh clones build incrementally; nothing depends on it)
#   LEASEHOLD_SKIP    space-separated stages to skip (lint unit wasm)
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

if ! skip unit; then
  stage "unit, property and integration tests"
  cargo test --workspace --locked
fi

if ! skip wasm; then
  stage "leasehold-core builds for wasm32-unknown-unknown"
  rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
    || rustup target add wasm32-unknown-unknown
  cargo build -p leasehold-core --target wasm32-unknown-unknown --release --locked
fi

stage "all green"
