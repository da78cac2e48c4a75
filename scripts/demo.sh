#!/usr/bin/env bash
# Sets up what is missing (scripts/setup.sh), then runs the demo: an MLP trained on neuron and
# on the CPU side by side, with the table of native and CPU-fallback ops.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/python examples/train_mlp.py "$@"
