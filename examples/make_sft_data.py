"""Saves what examples/sft.py trains, with no Hugging Face Hub: a tiny random model (fixed seed)
with the SmolLM2 tokenizer, and a local chat dataset of short question/answer conversations.

    python examples/make_sft_data.py /tmp/sft [--arch qwen3|llama] [--conversations 256]

writes /tmp/sft/model (save_pretrained) and /tmp/sft/data/train.jsonl ("messages" rows), which
`load_dataset("/tmp/sft/data", split="train")` reads.
"""
import argparse
import json
import os
import random

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from torch_neuronx.models import smollm2_path

WORDS = ("tensor core stream graph kernel device memory cache shard rank token layer weight "
         "gradient batch step loss model host queue").split()


def make_model(path, arch="qwen3"):
    tok = AutoTokenizer.from_pretrained(smollm2_path())
    torch.manual_seed(0)
    common = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                  tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                  pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    if arch == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(**common))
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    model.to(torch.bfloat16).save_pretrained(path)
    tok.save_pretrained(path)


def make_dataset(path, conversations=256, seed=0):
    rng = random.Random(seed)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "train.jsonl"), "w") as f:
        for _ in range(conversations):
            a, b = rng.sample(WORDS, 2)
            n = rng.randint(2, 9)
            answer = " ".join(rng.choice(WORDS) for _ in range(n))
            messages = [{"role": "user", "content": f"What links the {a} and the {b}?"},
                        {"role": "assistant", "content": f"The {a} and the {b} share {answer}."}]
            f.write(json.dumps({"messages": messages}) + "\n")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--arch", choices=("qwen3", "llama"), default="qwen3")
    p.add_argument("--conversations", type=int, default=256)
    args = p.parse_args()
    make_model(os.path.join(args.out, "model"), args.arch)
    make_dataset(os.path.join(args.out, "data"), args.conversations)
    print(f"model: {args.out}/model  dataset: {args.out}/data")
