"""Convolutions (conv2d, transposed conv2d, conv3d) and average pooling, forward and forward plus
backward, neuron vs the CPU with the same threads, side by side.

    python bench/conv.py [--repeat 5]

neuron is timed as a device (a block of calls, then one synchronize); the two sides alternate
(common.passes_pair) and each prints its best block, in ms per call, with the ratio CPU / neuron.
"""
import argparse
import os

import torch
import torch.nn as nn

import torch_neuronx  # noqa: F401  (registers the device)
from common import module_rows

CASES = [  # name, module, input shape
    ("conv2d 3x3", lambda: nn.Conv2d(64, 64, 3, padding=1), (2, 64, 32, 32)),  # a ResNet / UNet block
    ("convT2d k2 s2", lambda: nn.ConvTranspose2d(64, 32, 2, stride=2), (2, 64, 32, 32)),  # SAM's, DPT's necks
    ("convT2d k4 s4", lambda: nn.ConvTranspose2d(96, 96, 4, stride=4), (1, 96, 24, 24)),  # DPT's reassembly
    ("convT2d k4 s2 p1", lambda: nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), (2, 64, 32, 32)),  # GAN/VAE
    ("conv3d patches", lambda: nn.Conv3d(3, 256, (2, 14, 14), stride=(2, 14, 14), bias=False),
     (16, 3, 2, 14, 14)),  # Qwen2-VL's patch embedding: 16 patches
    ("avg_pool2d 3x3", lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False), (2, 64, 56, 56)),  # PoolFormer
    ("avg_pool2d 2x2", lambda: nn.AvgPool2d(2), (2, 128, 64, 64)),  # DenseNet's transitions
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--calls", type=int, default=5, help="calls per timed block")
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'op':>17} {'pass':>8} {'input':>20}  {'neuron ms':>9}  {'cpu ms':>7}  ratio")
    for name, shape, kind, t_n, t_c in module_rows(CASES, args.calls, args.repeat):
        print(f"{name:>17} {kind:>8} {str(tuple(shape)):>20}  {t_n * 1e3:9.3f}  {t_c * 1e3:7.3f}  {t_c / t_n:5.2f}x")

if __name__ == "__main__":
    main()
