"""How much of ATen runs natively on neuron.

    python -m torch_neuronx.tools.coverage                 # native vs CPU-fallback op counts
    python -m torch_neuronx.tools.coverage --list          # ... and the ops still on the fallback
    python -m torch_neuronx.tools.coverage script.py ARGS  # run a script, then show which ops it
                                                           # ran natively and which fell back

An op "needs a backend kernel" when it has a CPU kernel and no CompositeImplicitAutograd
decomposition; it is native on neuron when a PrivateUse1 kernel is registered for it.
"""
import argparse
import runpy
import sys
import warnings

import torch
import torch_neuronx


def _schemas():
    names = set()
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith("aten::"):
            names.add(schema.name + (f".{schema.overload_name}" if schema.overload_name else ""))
    return sorted(names)


def op_coverage():
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    needed, native = [], []
    for name in _schemas():
        try:
            if has(name, "CompositeImplicitAutograd") or not has(name, "CPU"):
                continue
        except RuntimeError:  # a TorchScript builtin, not a dispatcher op
            continue
        needed.append(name)
        if has(name, "PrivateUse1"):
            native.append(name)
    return needed, native


def run_script(path, args):
    warnings.filterwarnings("ignore", message=".*has no native neuron kernel.*")
    sys.argv = [path] + list(args)
    torch_neuronx.clear_op_tracking()
    try:
        runpy.run_path(path, run_name="__main__")
    finally:
        if torch.neuron.is_initialized():
            torch.neuron.synchronize()
    return torch_neuronx.get_executed_ops(), torch_neuronx.get_fallback_ops()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_neuronx.tools.coverage",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the ops still on the CPU fallback")
    parser.add_argument("script", nargs="?", help="a Python script to run and report on")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    opts = parser.parse_args(argv)
    if opts.script:
        executed, fallback = run_script(opts.script, opts.args)
        print(f"\n[coverage] {opts.script}: {sum(executed.values())} native op calls over {len(executed)} ops, "
              f"{sum(fallback.values())} CPU-fallback calls over {len(fallback)} ops")
        for name, count in sorted(fallback.items(), key=lambda kv: -kv[1]):
            print(f"  fallback  {count:>8}  {name}")
        return 0
    needed, native = op_coverage()
    print(f"aten ops needing a backend kernel: {len(needed)}")
    print(f"  native on neuron:  {len(native)} ({len(native) / max(len(needed), 1):.1%})")
    print(f"  CPU fallback:      {len(needed) - len(native)}")
    if opts.list:
        for name in sorted(set(needed) - set(native)):
            print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
