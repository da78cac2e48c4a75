"""The TorchNeuron announcement's Qwen-Image-2.1 tensor-parallel script, unchanged but for the
model: a tiny local pipeline saved with `save_pretrained` (tiny_diffusion.qwen_image21).

    torchrun --nproc_per_node=2 tests/dist_scripts/qwen_image21_tp.py MODEL_DIR

Rank 0 saves out.png in the working folder.
"""
import sys

model = sys.argv[1]

# --- the announcement's script from here on ---
import torch, torch.distributed as dist, torch_neuronx
from torch.distributed.device_mesh import DeviceMesh
from diffusers import QwenImage21Pipeline, QwenImage21Transformer2DModel, TensorParallelConfig
dist.init_process_group(backend="neuron")
dev = torch.neuron.current_device()
mesh = DeviceMesh("neuron", list(range(dist.get_world_size())))
transformer = QwenImage21Transformer2DModel.from_pretrained(model, subfolder="transformer",
    torch_dtype=torch.bfloat16, parallel_config=TensorParallelConfig(mesh=mesh))
pipe = QwenImage21Pipeline.from_pretrained(model, transformer=transformer, torch_dtype=torch.bfloat16)
pipe.vae.to(dev)
pipe.transformer.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)
emb, mask, _ = pipe.encode_prompt(prompt="A capybara wearing a wizard hat, oil painting", device="cpu")
image = pipe(prompt_embeds=emb.to(dev), prompt_embeds_mask=mask.to(dev) if mask is not None else None,
    height=64, width=64, num_inference_steps=2, generator=torch.Generator("cpu").manual_seed(0)).images[0]
if dist.get_rank() == 0:
    image.save("out.png")
