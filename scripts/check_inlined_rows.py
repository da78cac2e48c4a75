#!/usr/bin/env python3
"""Fails when an element function of the float32 row kernels is left out of line.

    scripts/check_inlined_rows.py HEADER... -- OBJECT...

The row kernels apply small per-element functions (rows_f32.h's f_*, math_f32.h's tn_*) in
loops the compiler vectorizes only when the function is inlined into the loop. A copy left
out of line means a call per element: the exact GELU's backward once ran 12 times slower
that way, with no warning. The functions are declared TN_INLINE (always_inline); this reads
their names from the headers and fails if any object still defines one, or any f_* element
function, as a function of its own.
"""
import re
import subprocess
import sys

DECL = re.compile(r"^TN_INLINE\s+[\w\s\*]*?\b(\w+)\s*\(", re.M)


def main(args):
    if "--" not in args:
        print(__doc__)
        return 2
    cut = args.index("--")
    headers, objects = args[:cut], args[cut + 1:]
    names = {m.group(1) for h in headers for m in DECL.finditer(open(h).read())}
    if not names or not objects:
        print("check_inlined_rows: no TN_INLINE function or no object given")
        return 1
    out = subprocess.run(["nm", *objects], check=True, capture_output=True, text=True).stdout
    bad, obj = [], None
    for line in out.splitlines():
        if line.endswith(":"):
            obj = line[:-1]
            continue
        parts = line.split()
        name = parts[2].split(".")[0] if len(parts) == 3 and parts[1] in "tT" else ""
        if name in names or name.startswith("f_"):
            bad.append(f"  {obj}: {parts[2]}")
    if bad:
        print("element functions left out of line (a call per element, no vector loop):")
        print("\n".join(bad))
        return 1
    print(f"row kernels: {len(names)} element functions, none out of line in {len(objects)} objects")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
