#!/usr/bin/env bash
# RUSTC_WRAPPER for tests/fuzz.sh: adds libFuzzer's SanitizerCoverage flags
# (and --cfg fuzzing) only to the crates the targets exercise, listed in
# $LEASEHOLD_FUZZ_INSTRUMENT, and only when built for the target (not for
# build scripts or proc macros). The rest of the dependency tree (the AWS
# SDK, rustls, redb, tokio...) builds plain and unoptimized, which is most of
# what keeps this build short; coverage there would only be noise.
rustc=$1
shift
name=
for_target=false
prev=
for arg in "$@"; do
  [[ $prev == --crate-name ]] && name=$arg
  [[ $arg == --target ]] && for_target=true
  prev=$arg
done
if $for_target && [[ -n $name && " $LEASEHOLD_FUZZ_INSTRUMENT " == *" $name "* ]]; then
  # shellcheck disable=SC2086 # one flag per word
  exec "$rustc" "$@" $LEASEHOLD_FUZZ_RUSTFLAGS
fi
exec "$rustc" "$@"
