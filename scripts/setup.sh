#!/usr/bin/env bash
# Creates .venv (if missing) with torch 2.13.0 (CPU) and the test tools, then builds and
# installs this package into it. Safe to re-run: only what changed is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TORCHNEURON_VENV:-.venv}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
if ! TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$VENV/bin/python" -c "import torch, pytest, expecttest, ninja, numpy" 2>/dev/null; then
  echo "[setup] installing torch==2.13.0 (CPU), numpy, pytest, expecttest, ninja"
  "${PIP[@]}" install "torch==2.13.0" numpy pytest expecttest ninja setuptools wheel 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
echo "[setup] building the C runtime and the PyTorch extension"
start=$(date +%s)
# Editable: the extension is built in place, so the source tree imports as the package.
"${PIP[@]}" install --no-build-isolation --no-deps -e .
echo "[setup] built and installed in $(( $(date +%s) - start ))s"
