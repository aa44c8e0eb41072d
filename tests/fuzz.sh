#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (the fuzz/ crate, libfuzzer-sys) of
# the RESP command decoder, the config parser and the HTTP API's JSON bodies,
# each for a bounded time, starting from the committed corpus in
# fuzz/corpus/<target>/. Exits non-zero if any target crashes, panics, fails
# one of its checks, or hangs; the input that did it is printed (base64) and
# kept under $CARGO_TARGET_DIR/artifacts/<target>/.
#
# Built on stable Rust: libFuzzer's coverage comes from LLVM's
# SanitizerCoverage pass, which stable rustc runs with -Cpasses=sancov-module
# (the flags cargo-fuzz passes). No sanitizer: -Zsanitizer is nightly-only,
# and the daemon forbids unsafe code; Rust's own checks (bounds, overflow,
# debug assertions) turn memory and arithmetic bugs into panics.
#
# Env:
#   CARGO_TARGET_DIR          build cache of the fuzz crate (default ~/.cache/leasehold/target/fuzz;
#                             never shared with the workspace's: the flags differ)
#   LEASEHOLD_FUZZ_SECONDS    time per target (default 20)
#   LEASEHOLD_FUZZ_TARGETS    space-separated subset of: resp_decode config http_check
#
# Longer runs, or a reproducer, by hand (after one run of this script):
#   $CARGO_TARGET_DIR/<triple>/release/<target> fuzz/corpus/<target> -dict=fuzz/dict/<target>.dict
#   $CARGO_TARGET_DIR/<triple>/release/<target> crash-file
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/leasehold/target/fuzz}
export CARGO_TERM_COLOR=never
SECONDS_PER_TARGET=${LEASEHOLD_FUZZ_SECONDS:-20}
TARGETS=${LEASEHOLD_FUZZ_TARGETS:-resp_decode config http_check}

# libFuzzer's instrumentation (the flags cargo-fuzz passes) on the crates under
# test only: fuzz/rustc-wrapper.sh adds them to the crates named here, built
# for the target triple (so never to build scripts or proc macros).
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
export RUSTC_WRAPPER="$ROOT/fuzz/rustc-wrapper.sh"
export LEASEHOLD_FUZZ_RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cllvm-args=-sanitizer-coverage-stack-depth --cfg fuzzing"
export LEASEHOLD_FUZZ_INSTRUMENT="leasehold_fuzz resp_decode config http_check leasehold leasehold_core \
toml toml_parser toml_datetime serde_spanned winnow serde_json serde_path_to_error \
axum axum_core matchit http mime percent_encoding form_urlencoded serde_urlencoded bytes"

# Cargo does not see what the wrapper adds: a cfg naming a digest of it makes
# any change to the flags, the list or the wrapper rebuild what it affects.
digest=$( { echo "$LEASEHOLD_FUZZ_RUSTFLAGS $LEASEHOLD_FUZZ_INSTRUMENT"; cat fuzz/rustc-wrapper.sh; } | cksum | cut -d' ' -f1)
export RUSTFLAGS="${RUSTFLAGS:-} --cfg leasehold_fuzz_$digest"

start=$(date +%s)
# Not --locked: fuzz/Cargo.lock pins the versions, but the daemon's own
# dependencies change with it, and cargo adds or drops those entries.
cargo build --manifest-path fuzz/Cargo.toml --release --target "$TRIPLE" --bins
echo "fuzz build: $(( $(date +%s) - start )) s"
BIN="$CARGO_TARGET_DIR/$TRIPLE/release"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/leasehold-fuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

failed=()
for t in $TARGETS; do
  mkdir -p "$WORK/$t/corpus" "$WORK/$t/artifacts"
  # Commands are short: longer streams only repeat them, more slowly.
  max_len=4096
  [[ $t == resp_decode ]] && max_len=1024
  # New inputs go to the scratch corpus (first directory); the committed seeds
  # are only read.
  # TMPDIR: scratch files of the targets' own go in the work directory.
  if TMPDIR="$WORK/$t" "$BIN/$t" "$WORK/$t/corpus" "fuzz/corpus/$t" -dict="fuzz/dict/$t.dict" \
      -max_total_time="$SECONDS_PER_TARGET" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$WORK/$t/artifacts/" >"$WORK/$t/log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/$t/log")
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$WORK/$t/log" | tail -1)
    printf 'fuzz %-12s ok: %s executions in %s s (%s)\n' "$t" "$execs" "$SECONDS_PER_TARGET" "$cov"
  else
    failed+=("$t")
    printf 'fuzz %-12s FAILED; end of its log:\n' "$t"
    grep -v -E '^#[0-9]+\s+(NEW|REDUCE|pulse|INITED|RELOAD)' "$WORK/$t/log" | tail -40
    keep="$CARGO_TARGET_DIR/artifacts/$t"
    mkdir -p "$keep"
    for f in "$WORK/$t/artifacts"/*; do
      [[ -f "$f" ]] || continue
      cp "$f" "$keep/"
      echo "reproducer $keep/$(basename "$f") (base64): $(base64 -w0 "$f")"
      echo "replay: $BIN/$t $keep/$(basename "$f")"
    done
  fi
done

if (( ${#failed[@]} )); then
  echo "fuzz: failures in: ${failed[*]}"
  exit 1
fi
echo "fuzz: no crashes ($(( $(date +%s) - start )) s with the build)"
