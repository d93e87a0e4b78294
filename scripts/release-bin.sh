#!/usr/bin/env bash
# Prints the path of the release `tensorfit` binary, building it first unless $BIN names
# one already (the measurement scripts run `BIN="$(scripts/release-bin.sh)"`).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${BIN:-}" ]; then
    echo "$BIN"
else
    cargo build --release --quiet --bin tensorfit >&2
    echo "$PWD/target/release/tensorfit"
fi
