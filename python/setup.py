"""Builds paro_torch._C from paro's headers (one translation unit) with torch's extension tooling.

    pip install --no-build-isolation ./python      # torch must be installed first (it is the build's ABI)

UCX is required (the transport under torchrun); MPI is used when mpicxx is found (the transport under
mpirun); OpenBLAS and Random123 serve SEPARATE. scripts/test-torch.sh installs all of them.
"""

import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = Path(__file__).resolve().parent
include_dirs = [str(here.parent / "include"), str(here / "paro_torch" / "csrc")]
library_dirs = []
libraries = ["ucp", "ucs", "openblas"]
extra_link_args = []
define_macros = []


def pkg_flags(command):
    return shlex.split(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


for flag in pkg_flags(["pkg-config", "--cflags", "ucx"]):
    if flag.startswith("-I"):
        include_dirs.append(flag[2:])
for candidate in ("/usr/include/x86_64-linux-gnu/openblas-pthread", "/usr/include/openblas"):
    if Path(candidate, "cblas.h").exists():
        include_dirs.append(candidate)
        break

if shutil.which("mpicxx"):
    # The C API only: no MPI C++ bindings (libmpi_cxx) to link.
    define_macros += [("PARO_TORCH_WITH_MPI", "1"), ("OMPI_SKIP_MPICXX", "1"), ("MPICH_SKIP_MPICXX", "1")]
    for flag in pkg_flags(["mpicxx", "--showme:compile"]):
        if flag.startswith("-I"):
            include_dirs.append(flag[2:])
    for flag in pkg_flags(["mpicxx", "--showme:link"]):
        if flag.startswith("-L"):
            library_dirs.append(flag[2:])
            extra_link_args.append("-Wl,-rpath," + flag[2:])
        elif flag.startswith("-l") and flag != "-lmpi_cxx":
            libraries.append(flag[2:])

setup(
    ext_modules=[
        CppExtension(
            "paro_torch._C",
            ["paro_torch/csrc/module.cpp"],
            include_dirs=include_dirs,
            library_dirs=library_dirs,
            libraries=libraries,
            define_macros=define_macros,
            extra_compile_args=["-O2", "-g0", "-fvisibility=hidden"],
            extra_link_args=extra_link_args,
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
