"""How much of ATen runs natively on neuron.

    python -m torch_neuronx.tools.coverage                 # native vs CPU-fallback op counts
    python -m torch_neuronx.tools.coverage --list          # ... and the ops still on the fallback
    python -m torch_neuronx.tools.coverage script.py ARGS  # run a script, then show which ops it
                                                           # ran natively and which fell back

An op "needs a backend kernel" when it has a CPU kernel and no CompositeImplicitAutograd
decomposition. It is native on neuron when a PrivateUse1 kernel is registered for it, or when
PyTorch computes it through its out= form (structured ops) and that form is native; ops whose
CompositeExplicitAutograd form runs other ops are counted apart (`op_coverage`).
"""
import argparse
import re
import runpy
import sys
import warnings

import torch
import torch_neuronx


def _schemas():
    """Every aten op's schema, by its full name (`name.overload`)."""
    found = {}
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith("aten::"):
            found[schema.name + (f".{schema.overload_name}" if schema.overload_name else "")] = schema
    return found


def _is_out_arg(arg):
    return arg.kwarg_only and arg.alias_info is not None and arg.alias_info.is_write


def _inputs(schema):
    return tuple((a.name, str(a.type)) for a in schema.arguments if not _is_out_arg(a))


def _out_forms(schemas):
    """(op name, its arguments but the out= ones) -> the out= overload's full name."""
    return {(s.name, _inputs(s)): name for name, s in schemas.items()
            if any(_is_out_arg(a) for a in s.arguments)}


def op_coverage():
    """Sort the aten ops that need a backend kernel by what runs them on neuron.

    An op needs a backend kernel when it has a CPU kernel and no CompositeImplicitAutograd
    decomposition. On neuron it runs:
    - "native": a neuron kernel is registered for it;
    - "out": it has none, but PyTorch's composite form of a structured op (the functional
      and in-place forms of `add`, `pow`, `clamp`, ...) calls its out= form, which is native;
    - "composite": it has none, and PyTorch's CompositeExplicitAutograd form runs it as other
      ops (natively or not, as those ops run);
    - "fallback": the CPU fallback (or an out= form that falls back).
    """
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    schemas = _schemas()
    forms = _out_forms(schemas)
    kinds = {}
    for name, schema in schemas.items():
        try:
            if has(name, "CompositeImplicitAutograd") or not has(name, "CPU"):
                continue
        except RuntimeError:  # a TorchScript builtin, not a dispatcher op
            continue
        if has(name, "PrivateUse1"):
            kinds[name] = "native"
        elif has(name, "CompositeExplicitAutogradNonFunctional") or has(name, "CompositeExplicitAutograd"):
            out = forms.get((re.sub(r"_$", "", schema.name), _inputs(schema)))
            if out is None or out == name:
                kinds[name] = "composite"
            else:
                kinds[name] = "out" if has(out, "PrivateUse1") else "fallback"
        else:
            kinds[name] = "fallback"
    return kinds


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
    kinds = op_coverage()
    count = {k: sum(1 for v in kinds.values() if v == k) for k in ("native", "out", "composite", "fallback")}
    total = max(len(kinds), 1)
    print(f"aten ops needing a backend kernel: {len(kinds)}")
    print(f"  native on neuron:  {count['native'] + count['out']} ({(count['native'] + count['out']) / total:.1%}): "
          f"{count['native']} with a neuron kernel, {count['out']} through their native out= form")
    print(f"  composite:         {count['composite']} ({count['composite'] / total:.1%}), run as other ops "
          "(natively or not, as those run)")
    print(f"  CPU fallback:      {count['fallback']} ({count['fallback'] / total:.1%})")
    if opts.list:
        for name in sorted(n for n, k in kinds.items() if k == "fallback"):
            print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
