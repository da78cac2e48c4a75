"""Builds the C core (make -> build/libtn.a) and the thin C++ extension torch_neuronx._C.

C sources get their flags from the Makefile (per-file ISA flags live there); the C++ glue is
compiled by torch's cpp_extension with ninja when available, so a change rebuilds one file.
"""
import glob
import os
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
JOBS = str(os.cpu_count() or 2)


class Build(BuildExtension):
    def run(self):
        subprocess.check_call(["make", "-C", ROOT, "-j", JOBS, "build/libtn.a"])
        super().run()


sources = sorted(glob.glob("torch_neuronx/csrc/**/*.cpp", recursive=True))

setup(
    ext_modules=[
        CppExtension(
            name="torch_neuronx._C",
            sources=sources,
            include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "torch_neuronx", "csrc")],
            extra_objects=[os.path.join(ROOT, "build", "libtn.a")],
            # relink whenever the C library or a public header changes
            depends=[os.path.join(ROOT, "build", "libtn.a")] + glob.glob(os.path.join(ROOT, "include", "tn", "*.h")),
            extra_compile_args=["-O2", "-Wno-unused-parameter"],
            libraries=["m"],
        )
    ],
    cmdclass={"build_ext": Build.with_options(use_ninja=True)},
)
