"""Demo: a Stable Diffusion pipeline (random weights, built from a config, so it runs offline)
on `neuron` and on the CPU from the same weights and the same noise; saves the neuron image as a
PNG and prints both times and how far the images differ.

    python examples/diffusion.py [--size 64] [--steps 10] [--dtype bfloat16] [--compile] [--out image.png]

--compile compiles the UNet's repeated blocks (`compile_repeated_blocks(backend="neuron")`, as
the TorchNeuron announcement runs its pipelines); the first call then includes the compile.
The CPU runs with as many threads as the device (TN_NUM_THREADS, default: all cores).
"""
import argparse
import os
import time

import numpy as np
import torch
import torch_neuronx
from torch_neuronx.models import tiny_diffusion


def generate(pipe, device, dtype, args):
    return pipe(**tiny_diffusion.prompt_inputs(pipe, device, dtype), num_inference_steps=args.steps,
                height=args.size, width=args.size, generator=torch.Generator("cpu").manual_seed(0))


def timed(pipe, device, dtype, args):
    t = time.perf_counter()
    out = generate(pipe, device, dtype, args)
    if device == "neuron":
        torch.neuron.synchronize()
    return out.images[0], time.perf_counter() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=64, help="image side in pixels (a multiple of 16)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--out", default="diffusion.png")
    args = p.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.set_num_threads(int(os.environ.get("TN_NUM_THREADS", os.cpu_count())))

    def build():
        return tiny_diffusion.stable_diffusion(size=args.size // 2, widths=(64, 128)).to(dtype=dtype)

    cpu = build()
    neuron = build().to("neuron")
    if args.compile:
        neuron.unet.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)
    print(f"neuron ({args.dtype}{', compiled' if args.compile else ''}):")
    image, t_first = timed(neuron, "neuron", dtype, args)
    image, t_neuron = timed(neuron, "neuron", dtype, args)
    print(f"cpu ({torch.get_num_threads()} threads):")
    ref, t_cpu = timed(cpu, "cpu", dtype, args)
    image.save(args.out)
    diff = np.abs(np.asarray(image, dtype=np.int16) - np.asarray(ref, dtype=np.int16))
    print(f"\n{args.size}x{args.size}, {args.steps} steps: neuron {t_neuron:.2f} s (first call {t_first:.2f} s), "
          f"cpu {t_cpu:.2f} s, {t_cpu / t_neuron:.2f}x")
    print(f"images differ by at most {diff.max()} of 255 (mean {diff.mean():.3f}); saved {args.out}")
    fell_back = torch_neuronx.get_fallback_ops()
    print("no op fell back to the CPU" if not fell_back else f"ops that ran on the CPU: {fell_back}")


if __name__ == "__main__":
    main()
