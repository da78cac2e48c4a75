#!/usr/bin/env bash
# Sets up what is missing (scripts/setup.sh), then runs the demo: SmolLM2-135M-Instruct chatting
# on neuron through Hugging Face Transformers (the answer streamed token by token), its prefill
# and decode speed against the CPU, whether the greedy tokens match, and the CPU-fallback ops.
# Arguments go to examples/chat.py, e.g. scripts/demo.sh "Why is the sky blue?" --dtype float32
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/python examples/chat.py "$@"
