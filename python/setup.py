"""Builds paro_torch._C from paro's headers (one translation unit) with torch's extension tooling.

    pip install --no-build-isolation ./python              # from a checkout; torch must be installed first
    python -m build --sdist --no-isolation python/          # an sdist that carries paro's headers
    pip install --no-build-isolation paro_torch-*.tar.gz    # anywhere, the repository out of sight

torch must be installed before building, also for the sdist: the extension is compiled against the torch
that will load it, and pip's isolated build would fetch a second one.
System libraries, found through pkg-config: UCX (required: the transport under torchrun), OpenBLAS and the
header-only Random123 (SEPARATE's projections and shared-seed streams); MPI is used when mpicxx is found
(the transport under mpirun). A missing one stops the build with one line naming the package to install.

PARO_TORCH_CUDA=1 builds the CUDA path too (CUDA tensors over the nccl transport): nvcc compiles the unit
(csrc/module.cu) for TORCH_CUDA_ARCH_LIST (default 9.0, Hopper), against the NCCL that torch loads (its
nvidia-nccl wheel where installed, else the system's).
"""

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import torch.utils.cpp_extension as cpp
from setuptools import setup
from setuptools.command.sdist import sdist
from torch.utils.cpp_extension import BuildExtension

here = Path(__file__).resolve().parent
# In an sdist paro's headers sit beside this file; in a checkout they are the repository's.
headers = here / "include" if (here / "include" / "paro").is_dir() else here.parent / "include"


def missing(what, debian, other):
    raise SystemExit(f"paro_torch: {what} not found; install {debian} (Debian/Ubuntu) or {other}, "
                     "or point PKG_CONFIG_PATH at its pkgconfig folder")


def pkg_config(module, debian, other):
    """Compile and link flags of a pkg-config module, or one clear line naming the package to install."""
    if not shutil.which("pkg-config"):
        raise SystemExit("paro_torch: pkg-config not found; install pkg-config (it locates UCX and OpenBLAS)")
    result = subprocess.run(["pkg-config", "--cflags", "--libs", module], capture_output=True, text=True)
    if result.returncode != 0:
        missing(f"{module} (pkg-config module '{module}')", debian, other)
    return shlex.split(result.stdout)


class SdistWithHeaders(sdist):
    """Copies paro's headers and license into the sdist, so that it builds without the repository."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        shutil.copytree(headers / "paro", Path(base_dir, "include", "paro"), dirs_exist_ok=True)
        license_file = headers.parent / "LICENSE"
        if license_file.exists():
            shutil.copy(license_file, Path(base_dir, "LICENSE"))


def extension():
    include_dirs = [str(headers), str(here / "paro_torch" / "csrc")]
    library_dirs = []
    libraries = []
    extra_link_args = []
    define_macros = [("PARO_HAVE_UCX", "1")]  # the backends this build has (paro/tools/backends.hpp)

    flags = pkg_config("ucx", "libucx-dev", "UCX from openucx.org") + pkg_config(
        "openblas", "libopenblas-dev", "OpenBLAS from your distribution")
    for flag in flags:
        if flag.startswith("-I"):
            include_dirs.append(flag[2:])
        elif flag.startswith("-L"):
            library_dirs.append(flag[2:])
        elif flag.startswith("-l"):
            libraries.append(flag[2:])
    probe = [*include_dirs, "/usr/include", "/usr/local/include", *os.environ.get("CPATH", "").split(":")]
    if not any(p and Path(p, "Random123", "philox.h").exists() for p in probe):
        raise SystemExit("paro_torch: Random123 headers (Random123/philox.h) not found; install librandom123-dev "
                         "(Debian/Ubuntu) or put Random123's include folder on CPATH")

    if shutil.which("mpicxx"):
        # The C API only: no MPI C++ bindings (libmpi_cxx) to link.
        define_macros += [("PARO_HAVE_MPI", "1"), ("OMPI_SKIP_MPICXX", "1"), ("MPICH_SKIP_MPICXX", "1")]
        for command in ("--showme:compile", "--showme:link"):
            for flag in shlex.split(subprocess.run(["mpicxx", command], check=True, capture_output=True,
                                                   text=True).stdout):
                if flag.startswith("-I"):
                    include_dirs.append(flag[2:])
                elif flag.startswith("-L"):
                    library_dirs.append(flag[2:])
                    extra_link_args.append("-Wl,-rpath," + flag[2:])
                elif flag.startswith("-l") and flag != "-lmpi_cxx":
                    libraries.append(flag[2:])

    host_flags = ["-O2", "-g0", "-fvisibility=hidden"]
    cuda = os.environ.get("PARO_TORCH_CUDA", "0")
    if cuda not in ("0", "1"):
        raise SystemExit(f"paro_torch: PARO_TORCH_CUDA={cuda!r}; allowed: 0 (CPU tensors only) or 1 (also CUDA)")
    if cuda == "0":
        return cpp.CppExtension(
            "paro_torch._C", ["paro_torch/csrc/module.cpp"], include_dirs=include_dirs, library_dirs=library_dirs,
            libraries=libraries, define_macros=define_macros, extra_compile_args=host_flags,
            extra_link_args=extra_link_args)
    if not shutil.which("nvcc"):
        raise SystemExit("paro_torch: PARO_TORCH_CUDA=1 but nvcc is not on PATH")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    define_macros.append(("PARO_HAVE_CUDA", "1"))
    # The NCCL that torch itself loads: a second libnccl.so.2 in one process would be the first one anyway.
    try:
        import nvidia.nccl

        nccl = Path(list(nvidia.nccl.__path__)[0])
        include_dirs.append(str(nccl / "include"))
        library_dirs.append(str(nccl / "lib"))
        extra_link_args += ["-l:libnccl.so.2", "-Wl,-rpath," + str(nccl / "lib")]
    except ImportError:
        libraries.append("nccl")
    return cpp.CUDAExtension(
        "paro_torch._C", ["paro_torch/csrc/module.cu"], include_dirs=include_dirs, library_dirs=library_dirs,
        libraries=libraries, define_macros=define_macros,
        extra_compile_args={"cxx": host_flags, "nvcc": ["-O2", "-Xcompiler=-fvisibility=hidden"]},
        extra_link_args=extra_link_args)


setup(ext_modules=[extension()], cmdclass={"build_ext": BuildExtension, "sdist": SdistWithHeaders})
