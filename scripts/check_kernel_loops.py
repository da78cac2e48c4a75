#!/usr/bin/env python3
"""Fails when an FMA loop of a GEMM micro-kernel touches the stack.

    scripts/check_kernel_loops.py OBJECT...

A micro-kernel keeps its accumulators in registers; GCC 12 once kept an array of AVX2
accumulators in registers and still stored ten of them to the stack on every k step, which
held the kernel to a third of its peak (docs/kernels.md). No compiler warning names that, so
this reads the disassembly instead: in each object, every loop (the span from a backward
jump's target to the jump) that contains a fused multiply-add or a bf16 dot product must not
read or write memory through %rsp or %rbp. The functions checked are those named below;
objdump comes with the C toolchain.
"""
import re
import subprocess
import sys

FUNCTIONS = {"ukernel", "dot", "fma_burst"}
FMA = re.compile(r"\bv(fmadd|fnmadd|dpbf16ps)")
STACK = re.compile(r"\(%r[sb]p\)")
LINE = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
FUNC = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
JUMP = re.compile(r"^j\w+\s+([0-9a-f]+) <")


def functions(obj):
    """{name: [(address, instruction text)]} for the checked functions of an object."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], check=True,
                         capture_output=True, text=True).stdout
    found, current = {}, None
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            current = m.group(1) if m.group(1) in FUNCTIONS else None
            if current:
                found[current] = []
            continue
        m = LINE.match(line)
        if m and current:
            found[current].append((int(m.group(1), 16), m.group(2).strip()))
    return found


def stack_uses_in_fma_loops(code):
    """Instructions that use the stack inside a loop that does FMAs: [(loop, instruction)]."""
    bad = []
    for addr, text in code:
        m = JUMP.match(text)
        if not m or int(m.group(1), 16) >= addr:
            continue
        start = int(m.group(1), 16)
        body = [(a, t) for a, t in code if start <= a <= addr]
        if any(FMA.search(t) for _, t in body):
            bad += [(f"{start:x}-{addr:x}", f"{a:x}: {t}") for a, t in body if STACK.search(t)]
    return bad


def main(objects):
    failures, checked = [], 0
    for obj in objects:
        for name, code in functions(obj).items():
            checked += 1
            failures += [f"{obj} {name} (loop {loop}): {insn}" for loop, insn in stack_uses_in_fma_loops(code)]
    if failures:
        print("FMA loops that go through the stack (accumulators spilled? see docs/kernels.md):")
        print("\n".join(f"  {f}" for f in failures))
        return 1
    if checked == 0:
        print("check_kernel_loops: no micro-kernel function found in", " ".join(objects))
        return 1
    print(f"kernel loops: {checked} functions, no stack use in their FMA loops")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
