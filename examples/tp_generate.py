"""Tensor-parallel generate on neuron: the TorchNeuron announcement's script, unchanged but for
MODEL_ID (argv[1], default: a tiny random Qwen3 saved by examples/make_tiny_qwen3.py).

    python examples/make_tiny_qwen3.py /tmp/tiny-qwen3
    torchrun --nproc_per_node=2 examples/tp_generate.py /tmp/tiny-qwen3
"""
import sys

import torch, torch.distributed as dist, torch_neuronx  # noqa: E401,F401
from torch.distributed import DeviceMesh
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from transformers.distributed import DistributedConfig
from transformers.generation.configuration_utils import CompileConfig

MODEL_ID = sys.argv[1] if len(sys.argv) > 1 else "/tmp/tiny-qwen3"
dist.init_process_group(backend="neuron")
world_size = dist.get_world_size()
model = AutoModelForCausalLM.from_pretrained(MODEL_ID, dtype=torch.bfloat16,
    distributed_config=DistributedConfig(tp_size=world_size),
    device_mesh=DeviceMesh("neuron", list(range(world_size)))).eval()
tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)
tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
tokenizer.padding_side = "left"
inputs = tokenizer.apply_chat_template([{"role": "user", "content": "The future of AI is"}],
    add_generation_prompt=True, padding=True, tokenizer_kwargs={"pad_to_multiple_of": 64}, return_tensors="pt")
config = GenerationConfig(max_new_tokens=16, do_sample=False, use_cache=True,
    pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    cache_implementation="static", max_cache_len=256, prefill_chunk_size=64,
    compile_config=CompileConfig(backend="neuron", fullgraph=False, dynamic=False))
with torch.no_grad():
    out = model.generate(inputs["input_ids"], attention_mask=inputs["attention_mask"], generation_config=config)
if dist.get_rank() == 0:
    print(tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))
    print("TOKENS", out[0, inputs["input_ids"].shape[1]:].tolist())
