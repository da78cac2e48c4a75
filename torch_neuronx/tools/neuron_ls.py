"""neuron-ls: the logical NeuronCores this process would see, with their memory, and the
memory every running process holds on each physical core.

    neuron-ls            table
    neuron-ls --json     the same as JSON
"""
import argparse
import json
import os
import sys


def _gib(n):
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def collect():
    from torch_neuronx import _C

    error = _C._init_error()
    if error:
        raise SystemExit(f"neuron-ls: {error}")
    usage = _C._usage_snapshot()
    me = os.getpid()
    cores = []
    for i in range(_C._device_count()):
        p = _C._device_properties(i)
        rows = [u for u in usage if u["physical_core"] == p["physical_core"] and u["pid"] != me]
        first, n = p["physical_core"], p["physical_cores"]
        cores.append(
            {
                "device": f"neuron:{i}",
                "physical_core": first,
                "physical_cores": list(range(first, first + n)),
                "name": p["name"],
                "capacity": p["total_memory"],
                "in_use": sum(u["allocated"] for u in rows),
                "reserved": sum(u["reserved"] for u in rows),
                "processes": sorted({u["pid"] for u in rows if u["reserved"] or u["allocated"]}),
            }
        )
    return cores


def main(argv=None):
    parser = argparse.ArgumentParser(prog="neuron-ls", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    cores = collect()
    if args.json:
        json.dump(cores, sys.stdout, indent=2)
        print()
        return 0
    header = f"{'DEVICE':<10}{'CORES':>6}  {'NAME':<15}{'CAPACITY':>12}{'IN USE':>12}{'RESERVED':>12}  PROCESSES"
    print(header)
    print("-" * len(header))
    for c in cores:
        procs = ",".join(str(p) for p in c["processes"]) or "-"
        phys = c["physical_cores"]
        span = str(phys[0]) if len(phys) == 1 else f"{phys[0]}-{phys[-1]}"
        print(
            f"{c['device']:<10}{span:>6}  {c['name']:<15}{_gib(c['capacity']):>12}"
            f"{_gib(c['in_use']):>12}{_gib(c['reserved']):>12}  {procs}"
        )
    from torch_neuronx import _C

    lnc = _C._logical_nc_config()
    print(f"\n{len(cores)} logical NeuronCore(s) of {lnc} physical core(s) each "
          f"(NEURON_LOGICAL_NC_CONFIG={lnc}); software NeuronCores run by the TorchNeuron C runtime.")
    print(f"Kernels: {_C._isa()} (the best this CPU has unless TN_ISA or TN_AMX say otherwise).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
