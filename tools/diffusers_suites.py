"""Diffusers' own model tests on neuron against the same tests on the CPU.

    python tools/diffusers_suites.py --tree DIFFUSERS_CHECKOUT [--suites flux,sd3] [--failures]

Diffusers' test utilities pick the device from DIFFUSERS_TEST_DEVICE (and would pick neuron on
their own when torch_neuronx is installed), so each suite runs twice, in separate processes,
with DIFFUSERS_TEST_DEVICE=cpu and =neuron, offline (HF_HUB_OFFLINE=1), the CPU with as many
threads as the device (TN_NUM_THREADS). The test tree must match the installed Diffusers:
PyPI's sdist carries only tests/testing_utils.py, so it comes from a checkout of the release
tag (`git clone --branch v0.42.1 https://github.com/huggingface/diffusers`); tests that
download weights from the Hub fail on both sides and count as "fail both".
"""
import argparse
import os

import suite_runner

SUITES = {
    "unet_2d_condition": "tests/models/unets/test_models_unet_2d_condition.py",
    "autoencoder_kl": "tests/models/autoencoders/test_models_autoencoder_kl.py",
    "autoencoder_wan": "tests/models/autoencoders/test_models_autoencoder_wan.py",
    "pixart": "tests/models/transformers/test_models_pixart_transformer2d.py",
    "sd3": "tests/models/transformers/test_models_transformer_sd3.py",
    "flux": "tests/models/transformers/test_models_transformer_flux.py",
    "flux2": "tests/models/transformers/test_models_transformer_flux2.py",
    "qwenimage": "tests/models/transformers/test_models_transformer_qwenimage.py",
    "qwenimage21": "tests/models/transformers/test_models_transformer_qwenimage21.py",
    "wan": "tests/models/transformers/test_models_transformer_wan.py",
    "minimax_h3": "tests/models/transformers/test_models_transformer_minimax_h3.py",
}


def device_env(device):
    threads = os.environ.get("TN_NUM_THREADS", str(os.cpu_count()))
    return dict(os.environ, HF_HUB_OFFLINE="1", DIFFUSERS_TEST_DEVICE=device, OMP_NUM_THREADS=threads,
                TN_NUM_THREADS=threads)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", required=True, help="a Diffusers checkout (its tests/ folder is used)")
    p.add_argument("--suites", default=",".join(SUITES), help="comma-separated names: " + ", ".join(SUITES))
    p.add_argument("--timeout", type=float, default=1800, help="seconds per suite and device")
    p.add_argument("--failures", action="store_true", help="list the tests that fail on one side only")
    args = p.parse_args()
    chosen = {}
    for name in args.suites.split(","):
        path = SUITES[name]
        if os.path.exists(os.path.join(args.tree, path)):
            chosen[name] = path
        else:
            print(f"[{name}] not in this tree: {path}")
    suite_runner.run(chosen, args.tree, device_env, args.timeout, args.failures)


if __name__ == "__main__":
    main()
