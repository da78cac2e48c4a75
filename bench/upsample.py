"""2-D upsampling (F.interpolate, nearest, bilinear and bicubic, scale 2), forward and forward plus
backward, neuron vs the CPU with the same threads, side by side.

    python bench/upsample.py [--repeat 5]

neuron is timed as a device (a block of calls, then one synchronize); the two sides alternate
(common.passes_pair) and each prints its best block, in ms per call, with the ratio CPU / neuron.
"""
import argparse
import os

import torch
import torch.nn.functional as F

import torch_neuronx  # noqa: F401  (registers the device)
from common import passes_pair

SHAPES = [(2, 256, 32, 32), (1, 64, 128, 128)]  # a UNet up block's input; a segmentation head's


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--calls", type=int, default=10, help="calls per timed block")
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'mode':>8} {'pass':>8} {'input':>18}  {'neuron ms':>9}  {'cpu ms':>7}  ratio")
    torch.manual_seed(0)
    for shape in SHAPES:
        x = torch.randn(*shape)
        g = torch.randn(*shape[:2], 2 * shape[2], 2 * shape[3])
        for mode in ("nearest", "bilinear", "bicubic"):
            def up(t, mode=mode):
                return F.interpolate(t, scale_factor=2, mode=mode)
            for kind, t_n, t_c in passes_pair(up, up, x, g, args.calls, args.repeat):
                print(f"{mode:>8} {kind:>8} {str(tuple(shape)):>18}  {t_n * 1e3:9.3f}  {t_c * 1e3:7.3f}  "
                      f"{t_c / t_n:5.2f}x")


if __name__ == "__main__":
    main()
