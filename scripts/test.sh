#!/usr/bin/env bash
# Sets up what is missing (scripts/setup.sh), then runs the whole test suite: the C unit tests
# under AddressSanitizer and UBSan, the public-header check, and pytest. Extra arguments go to
# pytest (e.g. `scripts/test.sh -k copy`, `scripts/test.sh -m slow` for the long tests).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
echo "[test] C unit tests (AddressSanitizer + UBSan) and header check"
make -s -j2 test-c
echo "[test] Python tests"
export HF_HUB_OFFLINE=1
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
