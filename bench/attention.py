"""Fused attention: neuron's C kernel vs PyTorch's CPU scaled_dot_product_attention, one run.

    python bench/attention.py [--repeat 20]

Language-model shapes (batch 1, 8 heads of 64): a causal prefill of L tokens and a decode
step (one query against S cached keys; also SmolLM2's 9 query heads on 3 kv heads), forward only, float32 and bfloat16; ms per call and
the ratio. Then a training step with dropout (forward and backward, float32; 8 heads, and
SmolLM2's 9 query heads on 3 kv heads at batch 1, whose backward threads share a group): the fused
kernel, neuron's math path (matmul, softmax, dropout, matmul) and the CPU. neuron is timed as
a device: a block of launches (40 for a decode row, 20 at L=128, 4 at L=512), then one
synchronize; neuron and the CPU alternate, with a pause before each timed block (common.best_pair).
"""
import argparse
import os

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from common import best, best_pair

F = torch.nn.functional


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'case':>22} {'dtype':>9}  {'neuron ms':>9} {'cpu ms':>8}  {'cpu/neuron':>10}")
    for dtype in (torch.float32, torch.bfloat16):
        for name, l, s, causal, hkv in (("prefill L=512", 512, 512, True, 8), ("prefill L=128", 128, 128, True, 8),
                                        ("decode S=512", 1, 512, False, 8), ("decode S=2048", 1, 2048, False, 8),
                                        ("decode GQA 9/3 S=1024", 1, 1024, False, 3)):
            q = torch.randn(1, 9 if hkv == 3 else 8, l, 64).to(dtype)
            k, v = torch.randn(1, hkv, s, 64).to(dtype), torch.randn(1, hkv, s, 64).to(dtype)
            qd, kd, vd = q.to("neuron"), k.to("neuron"), v.to("neuron")
            kw = dict(is_causal=causal, enable_gqa=hkv != 8)
            # blocks of calls (about 2 ms or more), alternating, each after a pause
            # (common.best_pair): timed one call at a time, a whole decode row of neuron calls
            # fell inside the spin of the CPU's OpenMP threads after the previous row's CPU
            # calls, which took the cores
            calls = {1: 40, 128: 20}.get(l, 4)

            def run_dev():
                for _ in range(calls):
                    F.scaled_dot_product_attention(qd, kd, vd, **kw)
                torch.neuron.synchronize()

            def run_cpu():
                for _ in range(calls):
                    F.scaled_dot_product_attention(q, k, v, **kw)

            t_dev, t_cpu = (t / calls for t in best_pair(run_dev, run_cpu, args.repeat))
            print(f"{name:>22} {str(dtype)[6:]:>9}  {t_dev * 1e3:>9.2f} {t_cpu * 1e3:>8.2f}  {t_cpu / t_dev:>9.2f}x")
    print(f"\n{'train, dropout 0.1':>22} {'fused ms':>9} {'math ms':>8} {'cpu ms':>8}  {'cpu/fused':>9} {'math/fused':>10}")
    for label, l, hq, hkv in (("causal L=S=128", 128, 8, 8), ("causal L=S=512", 512, 8, 8),
                              ("9/3 heads L=S=512", 512, 9, 3)):
        leaves = [torch.randn(1, h, l, 64, requires_grad=True) for h in (hq, hkv, hkv)]
        dev = [t.detach().to("neuron").requires_grad_() for t in leaves]

        def step(tensors, backend, sync):
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(*tensors, dropout_p=0.1, is_causal=True,
                                               enable_gqa=hq != hkv).sum().backward()
            if sync:
                torch.neuron.synchronize()

        t_fused = best(lambda: step(dev, SDPBackend.OVERRIDEABLE, True), args.repeat)
        t_math = best(lambda: step(dev, SDPBackend.MATH, True), args.repeat)
        t_cpu = best(lambda: step(leaves, SDPBackend.MATH, False), args.repeat)
        print(f"{label:>22} {t_fused * 1e3:>9.2f} {t_math * 1e3:>8.2f} {t_cpu * 1e3:>8.2f}  "
              f"{t_cpu / t_fused:>8.2f}x {t_math / t_fused:>9.2f}x")


if __name__ == "__main__":
    main()
