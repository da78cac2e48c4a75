"""Diffusion pipelines' parts: neuron eager and compiled vs CPU eager and Inductor, one run.

    python bench/diffusion.py [--configs tiny,mid] [--sizes 64,256] [--dtypes float32,bfloat16] [--repeat 3]
    python bench/diffusion.py --trace --configs mid --sizes 64 --dtypes float32   # device time per kernel

Per row, a Stable Diffusion UNet's denoising step (one call on the classifier-free-guidance batch
of 2 latents, the text embeddings of 77 tokens) and the VAE's decode of one latent, at an image
side of --sizes pixels. Configs (torch_neuronx.models.tiny_diffusion, random weights): "tiny"
(the tests' pipeline: widths 32/64, 2 layers per block) and "mid" (widths 128/256/512, 2 layers
per block, cross-attention 768: real SD channel widths scaled down 2.5x to fit this machine).
"compiled" is `torch.compile(model, backend="neuron", dynamic=False)` on neuron and
`torch.compile(model, dynamic=False)` (Inductor) on the CPU; "first s" is its first call (cold:
every row is a new process with an empty cache directory), the others the best of --repeat
calls after two unmeasured ones (a compiled graph records at its second call and replays from
the third). The CPU gets as many threads as the device (TN_NUM_THREADS, default the machine's
CPUs). The ratios at the end are the issue's targets: eager >= 1.0x CPU eager; compiled >= 1.3x
CPU eager and >= 1.0x Inductor; first compiled call <= Inductor's first call.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CONFIGS = {"tiny": dict(widths=(32, 64), layers_per_block=2, cross_attention_dim=32),
           "mid": dict(widths=(128, 256, 512), layers_per_block=2, cross_attention_dim=768)}
ROWS = (("neuron", "eager"), ("cpu", "eager"), ("neuron", "compiled"), ("cpu", "compiled"))


def threads():
    return int(os.environ.get("TN_NUM_THREADS", os.cpu_count()))


def calls(config, size, dtype_name, device, mode):
    """{part: (call, args)} for one row, in this process."""
    import torch

    torch.set_num_threads(threads())
    if device == "neuron":
        import torch_neuronx  # noqa: F401
    from torch_neuronx.models import tiny_diffusion

    dtype = getattr(torch, dtype_name)
    pipe = tiny_diffusion.stable_diffusion(size=size // 2, **CONFIGS[config])
    factor = pipe.vae_scale_factor
    g = torch.Generator().manual_seed(0)
    latent = size // factor
    inputs = {"unet": (torch.randn(2, 4, latent, latent, generator=g), torch.tensor(500),
                       torch.randn(2, 77, CONFIGS[config]["cross_attention_dim"], generator=g)),
              "vae decode": (torch.randn(1, 4, latent, latent, generator=g),)}
    out = {}
    for part in inputs:
        if part == "unet":
            module = pipe.unet.to(device, dtype).eval()
            call = lambda x, t, e, m=module: m(x, t, encoder_hidden_states=e).sample  # noqa: E731
        else:
            module = pipe.vae.to(device, dtype).eval()
            call = lambda z, m=module: m.decode(z).sample  # noqa: E731
        if mode == "compiled":
            call = torch.compile(call, backend="neuron" if device == "neuron" else "inductor", dynamic=False)
        args = [a.to(device, dtype) if a.is_floating_point() else a.to(device) for a in inputs[part]]
        out[part] = (call, args)
    return out


def measure(config, size, dtype_name, device, mode, repeat):
    """One row, in this process: {part: (first call s, best s)}."""
    import torch

    sync = torch.neuron.synchronize if device == "neuron" else (lambda: None)
    out = {}
    for part, (call, args) in calls(config, size, dtype_name, device, mode).items():
        with torch.no_grad():
            t = time.perf_counter()
            call(*args)
            sync()
            first = time.perf_counter() - t
            for _ in range(2):
                call(*args)
            sync()
            best = float("inf")
            for _ in range(repeat):
                t = time.perf_counter()
                call(*args)
                sync()
                best = min(best, time.perf_counter() - t)
        out[part] = (first, best)
    return out


def trace(config, size, dtype_name, rows=20):
    """Device time per kernel of one steady call, neuron eager beside neuron compiled."""
    import torch
    from torch_neuronx.neuron.trace import DeviceTrace

    totals = {}
    for mode in ("eager", "compiled"):
        for part, (call, args) in calls(config, size, dtype_name, "neuron", mode).items():
            with torch.no_grad():
                for _ in range(3):
                    call(*args)
                torch.neuron.synchronize()
                t = time.perf_counter()
                with DeviceTrace() as tr:
                    call(*args)
                wall = time.perf_counter() - t
            totals[part, mode] = (tr.totals(), tr.total_ns(), wall)
            torch._dynamo.reset()
    for part in ("unet", "vae decode"):
        (eager, e_ns, e_wall), (comp, c_ns, c_wall) = totals[part, "eager"], totals[part, "compiled"]
        print(f"\n{config} {size} {dtype_name} {part}: device busy {e_ns / 1e6:.1f} ms eager "
              f"(wall {e_wall * 1e3:.1f}), {c_ns / 1e6:.1f} ms compiled (wall {c_wall * 1e3:.1f})")
        print(f"{'kernel':<44}{'eager calls':>12}{'ms':>9}{'compiled calls':>16}{'ms':>9}")
        names = sorted(set(eager) | set(comp), key=lambda n: -max(eager.get(n, (0, 0))[1], comp.get(n, (0, 0))[1]))
        for n in names[:rows]:
            ec, et = eager.get(n, (0, 0))
            cc, ct = comp.get(n, (0, 0))
            print(f"{n[:44]:<44}{ec:>12}{et / 1e6:>9.2f}{cc:>16}{ct / 1e6:>9.2f}")


def run_row(config, size, dtype, device, mode, repeat):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
                   TORCH_NEURONX_NEFF_CACHE_DIR=os.path.join(cache, "neuron"), TORCH_NEURONX_COMPILE_LOG="0",
                   HF_HUB_OFFLINE="1")
        cmd = [sys.executable, __file__, "--row", json.dumps([config, size, dtype, device, mode, repeat])]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode != 0:
            return {"error": res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit {res.returncode}"}
        return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="tiny,mid")
    p.add_argument("--sizes", default="64,256")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--trace", action="store_true",
                   help="instead of timing: device time per kernel, neuron eager beside compiled")
    p.add_argument("--row", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.trace:
        for config in args.configs.split(","):
            for size in map(int, args.sizes.split(",")):
                for dtype in args.dtypes.split(","):
                    trace(config, size, dtype)
        return
    if args.row:
        print(json.dumps(measure(*json.loads(args.row))))
        return
    import platform
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {threads()} threads each side; "
          "seconds per call (first call, then best of the steady calls)")
    print(f"{'config':<6}{'size':>5} {'dtype':<9}{'part':<11}" +
          "".join(f"{d + ' ' + m:>24}" for d, m in ROWS) + "   eager/cpu  comp/cpu  comp/ind  first/ind")
    for config in args.configs.split(","):
        for size in map(int, args.sizes.split(",")):
            for dtype in args.dtypes.split(","):
                rows = {(d, m): run_row(config, size, dtype, d, m, args.repeat) for d, m in ROWS}
                for part in ("unet", "vae decode"):
                    cells, t = [], {}
                    for key in ROWS:
                        r = rows[key]
                        if "error" in r:
                            cells.append(f"{'failed':>24}")
                            continue
                        first, best = r[part]
                        t[key] = (first, best)
                        cells.append(f"{first:>11.3f} {best:>11.4f} ")
                    def ratio(a, b, i=1):
                        return f"{t[b][i] / t[a][i]:>9.2f}x" if a in t and b in t else f"{'-':>10}"
                    print(f"{config:<6}{size:>5} {dtype:<9}{part:<11}" + "".join(cells) +
                          ratio(("neuron", "eager"), ("cpu", "eager")) + ratio(("neuron", "compiled"), ("cpu", "eager")) +
                          ratio(("neuron", "compiled"), ("cpu", "compiled")) +
                          ratio(("neuron", "compiled"), ("cpu", "compiled"), 0))
                for key, r in rows.items():
                    if "error" in r:
                        print(f"  {key[0]} {key[1]} failed: {r['error']}")


if __name__ == "__main__":
    main()
