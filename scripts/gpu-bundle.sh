#!/usr/bin/env bash
# Builds the GPU check's bundle on a development machine (Rust, no GPU needed): the
# `tensorfit` CLI and the test binaries the GPU machine runs, stripped, with stable names,
# plus Debian's Vulkan loader (the GPU machine may lack it), into gpu-bundle/:
#
#   gpu-bundle/bin/tensorfit            the CLI (release)
#   gpu-bundle/bin/conformance          tests/conformance.rs (every device vs the CPU)
#   gpu-bundle/bin/tensorfit-cuda-tests crates/tensorfit-cuda/tests/cuda.rs
#   gpu-bundle/bin/tensorfit-dist-check the distributed rank program (its `nccl` scenario)
#   gpu-bundle/lib/libvulkan.so.1       from this machine's libvulkan1 package, if present
#   gpu-bundle/MANIFEST                 commit, date, sizes
#
# The bundle must stay within 64 MiB (what can be carried to the GPU machine); the script
# fails if it is larger. gpu-bundle/ ignores itself (it holds a `.gitignore` of `*`).
# Then, on the GPU machine, from a copy of this working tree: scripts/gpu-check.sh
#
# Usage: scripts/gpu-bundle.sh [OUT_DIR]   (default gpu-bundle; honours CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu-bundle}
LIMIT=$((64 * 1024 * 1024))
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TERM_COLOR=never

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
echo '*' > "$OUT/.gitignore"

echo "== cargo build --release --bin tensorfit"
cargo build --release --bin tensorfit
cp "$TARGET/release/tensorfit" "$OUT/bin/tensorfit"

# The executable of one test target, from cargo's JSON messages.
test_binary() {
    cargo test --release --no-run --message-format=json-render-diagnostics "$@" \
        | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -n 1
}

echo "== cargo test --release --no-run --test conformance"
exe=$(test_binary --test conformance)
[ -n "$exe" ] || { echo "gpu-bundle: no conformance test binary" >&2; exit 1; }
cp "$exe" "$OUT/bin/conformance"

echo "== cargo test --release --no-run -p tensorfit-cuda --test cuda"
exe=$(test_binary -p tensorfit-cuda --test cuda)
[ -n "$exe" ] || { echo "gpu-bundle: no tensorfit-cuda test binary" >&2; exit 1; }
cp "$exe" "$OUT/bin/tensorfit-cuda-tests"

echo "== cargo build --release -p tensorfit-dist --bin tensorfit-dist-check"
cargo build --release -p tensorfit-dist --bin tensorfit-dist-check
cp "$TARGET/release/tensorfit-dist-check" "$OUT/bin/tensorfit-dist-check"

strip "$OUT"/bin/*

loader=/usr/lib/x86_64-linux-gnu/libvulkan.so.1
if [ -e "$loader" ]; then
    cp -L "$loader" "$OUT/lib/libvulkan.so.1"
else
    echo "gpu-bundle: no $loader here (apt-get install libvulkan1 to bundle it); wgpu on the GPU machine will need its own loader" >&2
fi

size=$(du -cb "$OUT" | tail -n 1 | cut -f1)
{
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m) by $(rustc --version)"
    (cd "$OUT" && find bin lib -type f -exec ls -l {} + | awk '{print $5, $9}')
    echo "total: $size bytes"
} > "$OUT/MANIFEST"
cat "$OUT/MANIFEST"
if [ "$size" -gt "$LIMIT" ]; then
    echo "gpu-bundle: $size bytes is over the 64 MiB limit ($LIMIT bytes)" >&2
    exit 1
fi
echo "gpu-bundle: $OUT is ready ($((size / 1024 / 1024)) MiB of 64 MiB)"
