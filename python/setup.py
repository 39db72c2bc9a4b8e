"""Builds paro_torch._C from paro's headers (one translation unit) with torch's extension tooling.

    pip install --no-build-isolation ./python      # torch must be installed first (it is the build's ABI)

UCX is required (the transport under torchrun); MPI is used when mpicxx is found (the transport under
mpirun); OpenBLAS and Random123 serve SEPARATE. scripts/test-torch.sh installs all of them.

PARO_TORCH_CUDA=1 builds the CUDA path too (CUDA tensors over the nccl transport): nvcc compiles the unit
(csrc/module.cu) for TORCH_CUDA_ARCH_LIST (default 9.0, Hopper), against the NCCL that torch loads (its
nvidia-nccl wheel where installed, else the system's).
"""

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

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

host_flags = ["-O2", "-g0", "-fvisibility=hidden"]
cuda = os.environ.get("PARO_TORCH_CUDA", "0")
if cuda not in ("0", "1"):
    raise SystemExit(f"setup.py: PARO_TORCH_CUDA={cuda!r}; allowed: 0 (CPU tensors only) or 1 (also CUDA)")
if cuda == "1":
    if not shutil.which("nvcc"):
        raise SystemExit("setup.py: PARO_TORCH_CUDA=1 but nvcc is not on PATH")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    define_macros.append(("PARO_TORCH_WITH_CUDA", "1"))
    # The NCCL that torch itself loads: a second libnccl.so.2 in one process would be the first one anyway.
    try:
        import nvidia.nccl

        nccl = Path(list(nvidia.nccl.__path__)[0])
        include_dirs.append(str(nccl / "include"))
        library_dirs.append(str(nccl / "lib"))
        extra_link_args += ["-l:libnccl.so.2", "-Wl,-rpath," + str(nccl / "lib")]
    except ImportError:
        libraries.append("nccl")
    extension = CUDAExtension(
        "paro_torch._C",
        ["paro_torch/csrc/module.cu"],
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        libraries=libraries,
        define_macros=define_macros,
        extra_compile_args={"cxx": host_flags, "nvcc": ["-O2", "-Xcompiler=-fvisibility=hidden"]},
        extra_link_args=extra_link_args,
    )
else:
    extension = CppExtension(
        "paro_torch._C",
        ["paro_torch/csrc/module.cpp"],
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        libraries=libraries,
        define_macros=define_macros,
        extra_compile_args=host_flags,
        extra_link_args=extra_link_args,
    )

setup(
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExtension},
)
