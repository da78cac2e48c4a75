"""The TorchNeuron announcement's Diffusers tensor-parallel script, for a tiny local pipeline
saved with `save_pretrained` (torch_neuronx.models.tiny_diffusion), with its prompt embeddings
given (the tiny pipelines have no text encoder):

    torchrun --nproc_per_node=2 tests/dist_scripts/diffusers_tp.py MODEL_DIR KIND OUT.npy [--compile]

KIND: flux, flux2, qwen_image or qwen_image21. Rank 0 saves the image (numpy, HWC in [0, 1]) to OUT.npy.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch_neuronx  # noqa: F401
import diffusers
from diffusers import TensorParallelConfig
from torch.distributed.device_mesh import DeviceMesh
from torch_neuronx.models import tiny_diffusion

CLASSES = {"flux": ("FluxPipeline", "FluxTransformer2DModel"),
           "flux2": ("Flux2Pipeline", "Flux2Transformer2DModel"),
           "qwen_image": ("QwenImagePipeline", "QwenImageTransformer2DModel"),
           "qwen_image21": ("QwenImage21Pipeline", "QwenImage21Transformer2DModel")}


def main(model, kind, out, compile_blocks):
    pipeline_class, transformer_class = (getattr(diffusers, name) for name in CLASSES[kind])
    dist.init_process_group(backend="neuron")
    dev = torch.neuron.current_device()
    mesh = DeviceMesh("neuron", list(range(dist.get_world_size())))
    transformer = transformer_class.from_pretrained(model, subfolder="transformer", torch_dtype=torch.float32,
                                                    parallel_config=TensorParallelConfig(mesh=mesh))
    # the components the tiny pipeline was saved without (text encoders, tokenizers)
    with open(os.path.join(model, "model_index.json")) as f:
        absent = {name: None for name, value in json.load(f).items() if value == [None, None]}
    pipe = pipeline_class.from_pretrained(model, transformer=transformer, torch_dtype=torch.float32, **absent)
    pipe.vae.to(dev)
    if compile_blocks:
        pipe.transformer.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)
    pipe.set_progress_bar_config(disable=True)
    for _ in range(2 if compile_blocks else 1):  # compiled: the second call replays
        image = pipe(**tiny_diffusion.prompt_inputs(pipe, dev), height=32, width=32, num_inference_steps=2,
                     generator=torch.Generator("cpu").manual_seed(0), output_type="np").images
    if dist.get_rank() == 0:
        np.save(out, image)
        if compile_blocks:
            m = torch_neuronx.get_dynamo_metrics()
            print(f"TN_DIFFUSERS_TP replays={m['replays']} recompiles={m['recompiles']}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], "--compile" in sys.argv[4:])
