# Sourced first by the measurement scripts (`. "$(dirname "$0")/measuring.sh"`): strict
# mode, the repository root as the working directory, the release binary in BIN
# (scripts/release-bin.sh: built unless BIN names one) and a scratch directory DIR,
# removed when the script exits.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN="$(scripts/release-bin.sh)"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
