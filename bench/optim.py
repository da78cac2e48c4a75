"""An optimizer step: clip_grad_norm_ then AdamW (or SGD), on neuron and on the CPU, in one run.

    python bench/optim.py [--models tiny-llama,smollm2-shapes,many-small] [--repeat 5] [--amp]
                          [--optimizer adamw|sgd]

Parameter lists: the tiny Llama of bench/llm.py (4 layers, 27 tensors); SmolLM2-135M's
shapes (272 tensors, 135M parameters, random values: the step does not depend on them); and
200 tensors of 1,000 elements (launch cost dominates). Each configuration runs the same step on
its own copy (float32 parameters, gradients, AdamW(lr=1e-3, weight_decay=0.01) state), timed
as a device is (the step, then one synchronize), best of --repeat, the configurations taking
turns so that all see the same drift of this machine:

- neuron foreach: the default on neuron (torch.optim picks foreach for the device): each
  _foreach_* op is one launch over the list;
- neuron per tensor: foreach=False, one launch per tensor and op (what the _foreach_* ops
  cost before they ran as one launch);
- neuron fused: fused=True, one launch for the whole AdamW step;
- cpu: PyTorch's CPU default (per tensor), and cpu fused.

--optimizer sgd runs SGD(lr=1e-3, momentum=0.9) instead of AdamW. With --amp every step runs as a mixed-precision loop does, under torch.amp.GradScaler of its
device: unscale_ (before clipping), then scaler.step and scaler.update.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from llm import tiny_llama  # noqa: E402

import torch_neuronx  # noqa: E402,F401


def smollm2_shapes():
    hidden, inter, kv, vocab = 576, 1536, 192, 49152
    layer = [(hidden, hidden), (kv, hidden), (kv, hidden), (hidden, hidden), (inter, hidden), (inter, hidden),
             (hidden, inter), (hidden,), (hidden,)]
    return [(vocab, hidden)] + layer * 30 + [(hidden,)]


def shapes_of(model):
    if model == "tiny-llama":
        return [tuple(p.shape) for p in tiny_llama(torch.float32).parameters()]
    if model == "smollm2-shapes":
        return smollm2_shapes()
    return [(1000,)] * 200


def make_step(shapes, device, amp=False, optimizer="adamw", **opt_kw):
    g = torch.Generator().manual_seed(0)
    params = []
    for s in shapes:
        p = torch.nn.Parameter(torch.randn(s, generator=g).to(device))
        p.grad = torch.randn(s, generator=g).to(device) * 1e-2
        params.append(p)
    if optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9, **opt_kw)
    else:
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **opt_kw)
    scaler = torch.amp.GradScaler(device, init_scale=1.0) if amp else None
    if scaler:
        scaler.scale(torch.ones((), device=device))  # creates the scale, as scaling a loss does

    def step():
        if scaler:
            scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        if device == "neuron":
            torch.neuron.synchronize()
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="tiny-llama,smollm2-shapes,many-small")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--amp", action="store_true", help="run each step under torch.amp.GradScaler")
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    args = p.parse_args()
    from torch_neuronx import _C
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__} with {torch.get_num_threads()} threads; "
          f"neuron kernels: {_C._isa()}; {args.optimizer}" + (" under GradScaler" if args.amp else ""))
    configs = [("neuron foreach", "neuron", {}), ("neuron per tensor", "neuron", dict(foreach=False)),
               ("neuron fused", "neuron", dict(fused=True)), ("cpu", "cpu", {}), ("cpu fused", "cpu", dict(fused=True))]
    print(f"{'parameters':>15} {'tensors':>8} {'Mparams':>8} {'config':>18} {'ms/step':>9} {'vs neuron foreach':>18}")
    for model in args.models.split(","):
        shapes = shapes_of(model)
        steps = {label: make_step(shapes, device, args.amp, args.optimizer, **kw) for label, device, kw in configs}
        best = dict.fromkeys(steps, float("inf"))
        for step in steps.values():
            step()  # warm-up: optimizer state, kernel threads
        for _ in range(args.repeat):
            for label, step in steps.items():
                time.sleep(0.02)
                t = time.perf_counter()
                step()
                best[label] = min(best[label], time.perf_counter() - t)
        mparams = sum(torch.Size(s).numel() for s in shapes) / 1e6
        for label, t in best.items():
            print(f"{model:>15} {len(shapes):>8} {mparams:>8.1f} {label:>18} {t * 1e3:>9.2f} "
                  f"{t / best['neuron foreach']:>17.2f}x")
        del steps


if __name__ == "__main__":
    main()
