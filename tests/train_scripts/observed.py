"""Runs a training script unchanged and writes what it did to a JSON file, for the tests:

    python tests/train_scripts/observed.py OUT.json SCRIPT [script args...]
    torchrun ... tests/train_scripts/observed.py OUT.json SCRIPT [script args...]

(under torchrun each rank writes OUT.json.rank<R>). Recorded: every dict the Trainer logs, in
full precision (its progress output rounds to 4 digits), with Dynamo's recompile count and the
number of compiled graphs at that moment; the device the Trainer chose; and, at exit, the ops
that ran on the CPU fallback and torch_neuronx's compile metrics. The script itself runs as
`python SCRIPT` would run it (runpy, __name__ == "__main__", its argv).
"""
import atexit
import json
import os
import runpy
import sys

import torch
import transformers

out_path, script, *script_args = sys.argv[1:]
if "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1:
    out_path = f"{out_path}.rank{os.environ['RANK']}"
record = {"logs": [], "device": None}


def _neuron():
    if "torch_neuronx" not in sys.modules:
        return None
    return sys.modules["torch_neuronx"]


def _compile_counts():
    from torch._dynamo.utils import counters

    tn = _neuron()
    graphs = tn.get_dynamo_metrics().get("graphs", 0) if tn else 0
    return {"recompiles": sum(counters["recompiles"].values()), "graphs": graphs}


_log = transformers.Trainer.log


def log(self, logs, *args, **kwargs):
    record["device"] = str(self.args.device)
    record["logs"].append({**logs, **_compile_counts(), "step": self.state.global_step})
    return _log(self, logs, *args, **kwargs)


transformers.Trainer.log = log


@atexit.register
def _write():
    tn = _neuron()
    if tn:
        record["fallback_ops"] = dict(tn.get_fallback_ops())
        record["metrics"] = tn.get_dynamo_metrics()
    with open(out_path, "w") as f:
        json.dump(record, f, default=str)


sys.argv = [script, *script_args]
runpy.run_path(script, run_name="__main__")
