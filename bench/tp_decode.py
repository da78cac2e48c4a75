"""Tensor-parallel decode: tokens/s of examples/tp_generate.py's generate (static cache, compiled
decode, DistributedConfig(tp_size=world)) at TP=2 against TP=1, with the share of each decode
step spent in collectives.

    python bench/tp_decode.py                  # a random model of SmolLM2-135M's shape
    python bench/tp_decode.py --layers 4       # smaller, faster

The model has SmolLM2-135M's sizes (hidden 576, MLP 1536, 30 layers, its vocabulary) but 8 query
and 2 key/value heads, so that it splits over 2 ranks (SmolLM2's own 9 and 3 do not). Runs:
TP=1 with one kernel thread, TP=1 with two (the same cores TP=2 uses), TP=2 with one thread per
rank. Decode tokens/s = (N - 2) / (time of generate(N) - time of generate(2)), best of --repeats,
so prefill and compile are left out. Collective share = the time the group's collectives took on
their streams during those decode steps (torch_neuronx.distributed.collective_stats) over the
decode time.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

RESULT = "TP_DECODE "


def make_model(path, layers):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from torch_neuronx.models import smollm2_path

    tok = AutoTokenizer.from_pretrained(smollm2_path(verbose=False))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=576, intermediate_size=1536, num_hidden_layers=layers,
                      num_attention_heads=8, num_key_value_heads=2, head_dim=72, max_position_embeddings=2048,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(path)
    tok.save_pretrained(path)


def worker(args):
    import torch
    import torch.distributed as dist
    import torch_neuronx  # noqa: F401
    from torch.distributed import DeviceMesh
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.distributed import DistributedConfig
    from transformers.generation.configuration_utils import CompileConfig

    from torch_neuronx.distributed import collective_stats

    torch.set_num_threads(int(os.environ["TN_NUM_THREADS"]))
    dist.init_process_group(backend="neuron")
    world = dist.get_world_size()
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16,
        distributed_config=DistributedConfig(tp_size=world),
        device_mesh=DeviceMesh("neuron", list(range(world)))).eval()
    tok = AutoTokenizer.from_pretrained(args.model)
    tok.pad_token = tok.pad_token or tok.eos_token
    tok.padding_side = "left"
    inputs = tok.apply_chat_template([{"role": "user", "content": "The future of AI is"}],
        add_generation_prompt=True, padding=True, tokenizer_kwargs={"pad_to_multiple_of": 64},
        return_tensors="pt", return_dict=True)

    def generate(n):
        config = GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, use_cache=True,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
            cache_implementation="static", max_cache_len=256, prefill_chunk_size=64,
            compile_config=CompileConfig(backend="neuron", fullgraph=False, dynamic=False))
        dist.barrier()
        before = collective_stats()["seconds"]
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(inputs["input_ids"], attention_mask=inputs["attention_mask"], generation_config=config)
        torch.neuron.synchronize()
        return time.perf_counter() - t, collective_stats()["seconds"] - before

    generate(args.tokens)  # compiles prefill and decode
    best = None
    for _ in range(args.repeats):
        (t_long, c_long), (t_short, c_short) = generate(args.tokens), generate(2)
        decode, coll = t_long - t_short, c_long - c_short
        if best is None or decode < best[0]:
            best = (decode, coll)
    if dist.get_rank() == 0:
        decode, coll = best
        print(RESULT + json.dumps({"tokens_per_s": (args.tokens - 2) / decode, "collective_share": coll / decode}),
              flush=True)
    dist.destroy_process_group()


def run(args, nproc, threads):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, TN_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1",
           f"--master_port={port}", __file__, "--worker", "--model", args.model, "--tokens", str(args.tokens),
           "--repeats", str(args.repeats)]
    print(f"  TP={nproc}, {threads} thread(s) per rank ...", file=sys.stderr, flush=True)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    lines = [line for line in out.stdout.splitlines() if line.startswith(RESULT)]
    if out.returncode != 0 or not lines:
        sys.exit(f"TP={nproc} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len(RESULT):])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=30)
    p.add_argument("--tokens", type=int, default=34, help="new tokens of the long generate")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", help="a saved model folder (default: a random one of SmolLM2's shape)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.model:
            args.model = os.path.join(tmp, "model")
            make_model(args.model, args.layers)
        rows = [("TP=1", 1, 1), ("TP=1", 1, 2), ("TP=2", 2, 1)]
        results = [(name, threads, run(args, nproc, threads)) for name, nproc, threads in rows]
    base = results[0][2]["tokens_per_s"]
    print(f"decode of {args.tokens - 2} tokens, bfloat16, {os.cpu_count()} CPUs; model: {args.model if '--model' in sys.argv else f'SmolLM2-135M shape, {args.layers} layers, random'}")
    print(f"{'run':<6}{'threads/rank':>13}{'tokens/s':>10}{'vs TP=1x1':>11}{'collectives':>13}")
    for name, threads, r in results:
        print(f"{name:<6}{threads:>13}{r['tokens_per_s']:>10.1f}{r['tokens_per_s'] / base:>10.2f}x"
              f"{r['collective_share']:>12.0%}")


if __name__ == "__main__":
    main()
