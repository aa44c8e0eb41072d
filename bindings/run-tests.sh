#!/usr/bin/env bash
# Builds the three bindings and runs their suites: Node (napi-rs addon,
# `node --test`), Python (uniffi wheel built by maturin and pip-installed,
# pytest) and wasm (wasm-bindgen `--target nodejs` under `node --test`, and
# `--target web` in headless Chromium). Installs what it needs, idempotently,
# from the registries only (crates.io, PyPI, npm, Debian apt):
#   - the wasm32 target, wasm-bindgen-cli and a venv with maturin, via
#     ../shared/tools/install-bindings-toolchain.sh (relative to the repo root);
#   - uniffi-bindgen (PyPI's prebuilt, matching the `uniffi` crate) and pytest
#     into that venv;
#   - Debian's chromium when /usr/bin/chromium is missing;
#   - npm packages into the binding folders from their package-lock.json.
#
# Env:
#   CARGO_TARGET_DIR  build cache (default ~/.cache/leasehold/target, as tests/run.sh)
#   VENV              python venv (default ${XDG_CACHE_HOME:-~/.cache}/leasehold/venv)
#   SHARED_TOOLS      the shared tools folder (default <repo>/../shared/tools)
#   LEASEHOLD_BINDINGS  which suites to run (default "node python wasm")
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED_TOOLS=${SHARED_TOOLS:-$ROOT/../shared/tools}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/leasehold
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/target}
export VENV=${VENV:-$CACHE/venv}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
export PATH="$HOME/.cargo/bin:$PATH"
SUITES=${LEASEHOLD_BINDINGS:-node python wasm}
UNIFFI_BINDGEN_VERSION=0.31.0   # PyPI's prebuilt; works with the crate `uniffi = "0.31"`
PYTEST_VERSION=8.3.5
mkdir -p "$CARGO_TARGET_DIR" "$(dirname "$VENV")"

t_start=$SECONDS
stage() { printf '\n== bindings: %s (%s, +%ss)\n' "$1" "$(date +%T)" "$((SECONDS - t_start))"; }
want() { [[ " $SUITES " == *" $1 "* ]]; }
as_root() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }

# ------------------------------------------------------------ toolchains
stage "toolchains"
WASM_BINDGEN_VERSION=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' "$HERE/wasm/Cargo.toml")
export WASM_BINDGEN_VERSION
(cd "$ROOT" && "$SHARED_TOOLS/install-bindings-toolchain.sh")
pip_pin() {  # install NAME==VERSION into the venv unless that version is there
  "$VENV/bin/python" -m pip show "$1" 2>/dev/null | grep -qx "Version: $2" \
    || "$VENV/bin/python" -m pip install -q "$1==$2"
}
pip_pin uniffi-bindgen "$UNIFFI_BINDGEN_VERSION"
pip_pin pytest "$PYTEST_VERSION"
if want wasm && [[ ! -x /usr/bin/chromium && -z "${CHROMIUM_PATH:-}" ]]; then
  as_root apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y --no-install-recommends chromium
fi
npm_deps() {  # install a binding folder's locked npm packages when they changed
  local dir=$1 stamp=$1/node_modules/.package-lock.json
  if [[ ! -f "$stamp" || "$dir/package-lock.json" -nt "$stamp" ]]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# ------------------------------------------------------------ node
if want node; then
  stage "node: build the napi-rs addon"
  bash "$HERE/node/build.sh"
  stage "node: node --test"
  (cd "$HERE/node" && node --test test/)
fi

# ------------------------------------------------------------ python
if want python; then
  stage "python: build the wheel (maturin, uniffi) and pip install it"
  DIST=$(mktemp -d "${TMPDIR:-/tmp}/leasehold-wheel.XXXXXX")
  trap 'rm -rf "$DIST"' EXIT
  (cd "$HERE/python" && PATH="$VENV/bin:$PATH" "$VENV/bin/maturin" build --release --locked -o "$DIST")
  "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$DIST"/leasehold_python-*.whl
  stage "python: pytest"
  # Run from the tests folder so `import leasehold` is the installed wheel.
  (cd "$HERE/python/tests" && "$VENV/bin/python" -m pytest -q -p no:cacheprovider .)
fi

# ------------------------------------------------------------ wasm
if want wasm; then
  stage "wasm: build (wasm32) and wasm-bindgen --target web / --target nodejs"
  bash "$HERE/wasm/build.sh"
  npm_deps "$HERE/wasm"
  stage "wasm: node --test (nodejs build in Node, web build in headless Chromium)"
  (cd "$HERE/wasm" && node --test test/)
fi

stage "bindings green"
