"""pytest plugin for suite_runner.py: at the end of a session, writes the ops that fell back to
the CPU ({op: count}) to the file TN_SUITE_FALLBACKS names (nothing when torch_neuronx is
not loaded)."""
import json
import os
import sys


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("TN_SUITE_FALLBACKS")
    if not path or "torch_neuronx" not in sys.modules:
        return
    ops = sys.modules["torch_neuronx"].get_fallback_ops()
    with open(path, "w") as f:
        json.dump(dict(ops), f)
