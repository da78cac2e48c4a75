"""Diffusers' tensor parallelism on a `neuron` DeviceMesh: the TorchNeuron announcement's script
(tests/dist_scripts/diffusers_tp.py) under `torchrun --nproc_per_node=2`, for tiny pipelines
saved with `save_pretrained`; the image equals the single-process CPU image. Compiled with
`compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)`, the second call
replays and nothing recompiles; once with NEURON_LOGICAL_NC_CONFIG=2 (trn2's LNC=2). The
announcement's own Qwen-Image-2.1 script runs word for word on a tiny local pipeline."""
import os
import re

import numpy as np
import pytest
import torch

from dist_harness import child_env, run_torchrun
from test_diffusers import assert_matches_cpu

SCRIPT = os.path.join(os.path.dirname(__file__), "dist_scripts", "diffusers_tp.py")
ANNOUNCEMENT = os.path.join(os.path.dirname(__file__), "dist_scripts", "qwen_image21_tp.py")


@pytest.mark.parametrize("kind, compiled, lnc", [("flux", False, "1"), ("qwen_image", True, "1"), ("flux2", True, "2"),
                                                 ("qwen_image21", True, "1")],
                         ids=["flux-eager", "qwen_image-compiled", "flux2-compiled-lnc2", "qwen_image21-compiled"])
def test_tensor_parallel_pipeline_matches_cpu(tmp_path, kind, compiled, lnc):
    from torch_neuronx.models import tiny_diffusion

    model, out = tmp_path / kind, tmp_path / "image.npy"
    getattr(tiny_diffusion, kind)().save_pretrained(model)
    log = run_torchrun([SCRIPT, model, kind, out, *(["--compile"] if compiled else [])], nproc=2, timeout=300,
                       env=child_env({"NEURON_LOGICAL_NC_CONFIG": lnc, "TORCH_NEURONX_DISABLE_CPU_FALLBACK": "1"}),
                       what=f"diffusers TP=2 {kind}")
    assert_matches_cpu(np.load(out), kind, torch.float32)
    if compiled:
        replays, recompiles = map(int, re.search(r"TN_DIFFUSERS_TP replays=(\d+) recompiles=(\d+)", log).groups())
        assert replays > 0 and recompiles == 0, log[-2000:]


@pytest.mark.parametrize("lnc", ["1", "2"], ids=["lnc1", "lnc2"])
def test_announcement_qwen_image21_script(tmp_path, lnc):
    """The announcement's Qwen-Image-2.1 script, word for word (bfloat16, 64x64, prompt encoded on
    the CPU, compiled blocks): its out.png is the single-process CPU image, as close to the
    float32 one as the CPU's own bfloat16 image is (with test_diffusers' bfloat16 margin)."""
    from PIL import Image
    from diffusers import QwenImage21Pipeline
    from test_diffusers import BF16_MARGIN
    from torch_neuronx.models import tiny_diffusion

    model = tmp_path / "qwen_image21"
    tiny_diffusion.qwen_image21().save_pretrained(model)
    run_torchrun([ANNOUNCEMENT, model], nproc=2, timeout=300, cwd=tmp_path,
                 env=child_env({"NEURON_LOGICAL_NC_CONFIG": lnc, "TORCH_NEURONX_DISABLE_CPU_FALLBACK": "1"}),
                 what="the announcement's Qwen-Image-2.1 script, TP=2")
    out = np.asarray(Image.open(tmp_path / "out.png"), dtype=np.float32) / 255

    def cpu_image(dtype):
        pipe = QwenImage21Pipeline.from_pretrained(model, torch_dtype=dtype)
        pipe.set_progress_bar_config(disable=True)
        emb, mask, _ = pipe.encode_prompt(prompt="A capybara wearing a wizard hat, oil painting", device="cpu")
        image = pipe(prompt_embeds=emb, prompt_embeds_mask=mask, height=64, width=64, num_inference_steps=2,
                     generator=torch.Generator("cpu").manual_seed(0)).images[0]
        return np.asarray(image, dtype=np.float32) / 255

    exact, cpu = cpu_image(torch.float32), cpu_image(torch.bfloat16)
    assert out.shape == exact.shape == (64, 64, 4)
    diff, cpu_diff = np.abs(out - exact), np.abs(cpu - exact)
    assert diff.max() <= max(BF16_MARGIN[0] * cpu_diff.max(), 2 / 255), (diff.max(), cpu_diff.max())
    assert diff.mean() <= max(BF16_MARGIN[1] * cpu_diff.mean(), 0.5 / 255), (diff.mean(), cpu_diff.mean())
