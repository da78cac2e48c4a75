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


def zero_init_flags():
    """-ftrivial-auto-var-init=zero when the C++ compiler has it: the glue builds the structs
    it hands the runtime on the stack, and a recording reads their bytes word by word (see
    TN_TASKS_ZEROED in src/runtime/internal.h), so their padding must be zero."""
    cxx = os.environ.get("CXX", "c++")
    probe = subprocess.run([cxx, "-ftrivial-auto-var-init=zero", "-Werror", "-x", "c++", "-fsyntax-only", "-"],
                           input=b"", capture_output=True)
    return ["-ftrivial-auto-var-init=zero"] if probe.returncode == 0 else []


setup(
    ext_modules=[
        CppExtension(
            name="torch_neuronx._C",
            sources=sources,
            include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "torch_neuronx", "csrc")],
            extra_objects=[os.path.join(ROOT, "build", "libtn.a")],
            # relink whenever the C library or a public header changes
            depends=[os.path.join(ROOT, "build", "libtn.a")] + glob.glob(os.path.join(ROOT, "include", "tn", "*.h")),
            extra_compile_args=["-O2", "-Wno-unused-parameter"] + zero_init_flags(),
            # a build ID names this build in saved replay plans (tn/capture.h)
            extra_link_args=["-Wl,--build-id=sha1"],
            libraries=["m"],
        )
    ],
    cmdclass={"build_ext": Build.with_options(use_ninja=True)},
)
