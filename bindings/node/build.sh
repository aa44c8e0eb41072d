#!/usr/bin/env bash
# Builds the addon (release) and copies it next to index.js as leasehold.node.
# Honours CARGO_TARGET_DIR.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
cargo build --release -p leasehold-node --locked
TARGET_DIR=${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')}
case "$(uname -s)" in
  Darwin) lib=libleasehold_node.dylib ;;
  MINGW*|MSYS*|CYGWIN*) lib=leasehold_node.dll ;;
  *) lib=libleasehold_node.so ;;
esac
cp "$TARGET_DIR/release/$lib" "$HERE/leasehold.node.tmp"
mv -f "$HERE/leasehold.node.tmp" "$HERE/leasehold.node"
echo "built $HERE/leasehold.node"
