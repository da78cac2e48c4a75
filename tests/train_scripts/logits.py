"""Loads Transformers checkpoints on the CPU, in a process without torch_neuronx (run with
TORCH_DEVICE_BACKEND_AUTOLOAD=0), and saves their logits on fixed tokens:

    python tests/train_scripts/logits.py OUT.pt DIR [DIR ...]

OUT.pt holds {DIR: float32 logits of shape (2, 32, vocab)}. That a checkpoint loads here is
what makes it a standard checkpoint: config.json and safetensors, nothing of the device.
"""
import sys

import torch
from transformers import AutoModelForCausalLM

out, *dirs = sys.argv[1:]
assert "torch_neuronx" not in sys.modules
result = {}
for d in dirs:
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    ids = torch.randint(0, model.config.vocab_size, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        result[d] = model(ids).logits
torch.save(result, out)
