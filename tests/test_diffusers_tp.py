"""Diffusers' tensor parallelism on a `neuron` DeviceMesh: the TorchNeuron announcement's script
(tests/dist_scripts/diffusers_tp.py) under `torchrun --nproc_per_node=2`, for tiny pipelines
saved with `save_pretrained`; the image equals the single-process CPU image. Compiled with
`compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)`, the second call
replays and nothing recompiles; once with NEURON_LOGICAL_NC_CONFIG=2 (trn2's LNC=2)."""
import os
import re

import numpy as np
import pytest
import torch

from dist_harness import child_env, run_torchrun
from test_diffusers import assert_image_close, reference

SCRIPT = os.path.join(os.path.dirname(__file__), "dist_scripts", "diffusers_tp.py")


@pytest.mark.parametrize("kind, compiled, lnc", [("flux", False, "1"), ("qwen_image", True, "1"), ("flux2", True, "2")],
                         ids=["flux-eager", "qwen_image-compiled", "flux2-compiled-lnc2"])
def test_tensor_parallel_pipeline_matches_cpu(tmp_path, kind, compiled, lnc):
    from torch_neuronx.models import tiny_diffusion

    model, out = tmp_path / kind, tmp_path / "image.npy"
    getattr(tiny_diffusion, kind)().save_pretrained(model)
    log = run_torchrun([SCRIPT, model, kind, out, *(["--compile"] if compiled else [])], nproc=2, timeout=300,
                       env=child_env({"NEURON_LOGICAL_NC_CONFIG": lnc, "TORCH_NEURONX_DISABLE_CPU_FALLBACK": "1"}),
                       what=f"diffusers TP=2 {kind}")
    assert_image_close(np.load(out), reference(kind), torch.float32)
    if compiled:
        replays, recompiles = map(int, re.search(r"TN_DIFFUSERS_TP replays=(\d+) recompiles=(\d+)", log).groups())
        assert replays > 0 and recompiles == 0, log[-2000:]
