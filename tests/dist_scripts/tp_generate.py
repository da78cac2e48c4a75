"""Runs examples/tp_generate.py (the announcement's tensor-parallel generate script) unchanged,
then reports rank 0's greedy tokens as a TN_DIST_RESULT line. argv[1]: the model folder."""
import json
import os
import runpy
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tp_generate.py")
g = runpy.run_path(EXAMPLE, run_name="__main__")
dist = g["dist"]
if dist.get_rank() == 0:
    tokens = g["out"][0, g["inputs"]["input_ids"].shape[1]:].tolist()
    print("TN_DIST_RESULT " + json.dumps({"backend": "neuron", "world_size": dist.get_world_size(),
                                          "tokens": tokens}), flush=True)
dist.destroy_process_group()
