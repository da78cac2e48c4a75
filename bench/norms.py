"""Batch norm and group norm (nn.BatchNorm2d in training, nn.GroupNorm), forward and forward plus
backward, neuron vs the CPU with the same threads, side by side.

    python bench/norms.py [--repeat 7]

neuron is timed as a device (a block of calls, then one synchronize); the two sides alternate
(common.passes_pair) and each prints its best block, in ms per call, with the ratio CPU / neuron.
"""
import argparse
import os

import torch
import torch.nn as nn

import torch_neuronx  # noqa: F401  (registers the device)
from common import module_rows

CASES = [  # name, module, input shape: a ResNet stage, a UNet block, a wav2vec2 feature layer
    ("batch_norm", lambda: nn.BatchNorm2d(64), (8, 64, 56, 56)),
    ("group_norm", lambda: nn.GroupNorm(32, 128), (4, 128, 32, 32)),
    ("group_norm", lambda: nn.GroupNorm(512, 512), (2, 512, 3199)),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--calls", type=int, default=10, help="calls per timed block")
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'op':>11} {'pass':>8} {'shape':>18}  {'neuron ms':>9}  {'cpu ms':>7}  ratio")
    for name, shape, kind, t_n, t_c in module_rows(CASES, args.calls, args.repeat):
        print(f"{name:>11} {kind:>8} {str(tuple(shape)):>18}  {t_n * 1e3:9.3f}  {t_c * 1e3:7.3f}  {t_c / t_n:5.2f}x")

if __name__ == "__main__":
    main()
