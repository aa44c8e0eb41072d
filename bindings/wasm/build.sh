#!/usr/bin/env bash
# Builds the wasm module (release) and generates the two JS packages with
# wasm-bindgen: pkg/web (`--target web`, ES module + `init()`) and pkg/node
# (`--target nodejs`, require()). Honours CARGO_TARGET_DIR. Needs the
# wasm32-unknown-unknown target and wasm-bindgen-cli equal to the crate's
# pinned wasm-bindgen version (see ../../../shared/tools/README.md).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' Cargo.toml)
have=$(wasm-bindgen --version | awk '{print $2}')
if [[ "$want" != "$have" ]]; then
  echo "wasm-bindgen-cli $have does not match the crate's wasm-bindgen =$want" >&2
  exit 1
fi
cargo build --release -p leasehold-wasm --target wasm32-unknown-unknown --locked
TARGET_DIR=${CARGO_TARGET_DIR:-$(cd ../.. && pwd)/target}
WASM="$TARGET_DIR/wasm32-unknown-unknown/release/leasehold_wasm.wasm"
rm -rf pkg/web pkg/node
wasm-bindgen --target web --out-dir pkg/web "$WASM"
wasm-bindgen --target nodejs --out-dir pkg/node "$WASM"
# The nodejs build require()s the crate's inline_js snippet, which
# wasm-bindgen writes as an ES module; Node before 22 cannot require() that.
# Its exports are plain `export function name(`, made CommonJS here.
for snippet in $(find pkg/node/snippets -name '*.js' 2>/dev/null); do
  sed -i.esm 's/^export function \([A-Za-z_$][A-Za-z0-9_$]*\)(/exports.\1 = function \1(/' "$snippet"
  rm -f "$snippet.esm"
  if grep -qE '^\s*(export|import)\b' "$snippet"; then
    echo "build.sh: $snippet has ES module syntax this script does not convert" >&2
    exit 1
  fi
done
echo "built $HERE/pkg/web and $HERE/pkg/node ($(du -k pkg/web/leasehold_wasm_bg.wasm | cut -f1) KiB wasm)"
