"""PyTorch's own distributed backend tests (DistributedTest._DistTestBase, shipped in the torch wheel as
torch.testing._internal.distributed.distributed_test) run with BACKEND=paro, as test_distributed_spawn.py
runs them for gloo: each test spawns WORLD_SIZE processes that init_process_group("paro").

paro is declared a plugin backend with DDP and subgroups (DistTestCases.backend_feature), which is how
torch's suite admits backends it does not know. Only allow-listed tests run: the tests of the methods the
backend implements. Most of the rest are for other backends by name (torch runs its CPU all_to_all and
batch_isend_irecv tests only for mpi and gloo, the *_object_* tests only for gloo, nccl, ucc and xccl, and
test_barrier_timeout_global only for gloo, in torch 2.15), need CUDA, or need 8 processes (the *_group
tests); test_send_recv_any_source receives from any source, which paro refuses, and test_ddp_logging_data_cpu
expects DDP's log to name the backend, where torch names every plugin "custom". Each test starts 4 fresh
processes, about 15 s apiece on 2 cores, so the default is a selection that covers every method and DDP (CI
runs it); PARO_TORCH_SUITE=full runs the whole allow-list. A test that skips counts as a failure: the lists
name only tests that run here.

    python torch_suite.py                        # the selection, 4 processes
    PARO_TORCH_SUITE=full python torch_suite.py  # every allow-listed test
    python torch_suite.py test_barrier           # the named ones
"""

import os
import shutil
import sys
import tempfile
import unittest

os.environ.setdefault("BACKEND", "paro")
os.environ.setdefault("WORLD_SIZE", "4")
# The spawned processes import this file too: made once, here. Kept by name, since torch's test setup
# points TEMP_DIR elsewhere while it runs.
MADE_TEMP_DIR = None if "TEMP_DIR" in os.environ else tempfile.mkdtemp(prefix="paro-torch-suite-")
if MADE_TEMP_DIR:
    os.environ["TEMP_DIR"] = MADE_TEMP_DIR

import torch  # noqa: E402
import paro_torch  # noqa: E402,F401  (registers "paro" here and in every spawned process, which imports this file)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# Before distributed_test is imported: its skip decorators read these sets when its classes are defined.
for feature in ("plugin", "ddp", "subgroup"):
    DistTestCases.backend_feature[feature].add("paro")

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402

SELECTED = [  # every method, the world as a group, subgroups, async Works, DDP on CPU
    "test_all_reduce_sum_async",
    "test_all_reduce_full_group_max",
    "test_all_reduce_sum_complex",
    "test_broadcast_full_group",
    "test_all_gather_full_group",
    "test_barrier_full_group",
    "test_new_subgroups_with_group_param",
    "test_DistributedDataParallelCPU",
    "test_get_rank_size_group",
    "test_reduce_sum",
    "test_gather",
    "test_scatter",
    "test_send_recv_with_tag",
    "test_irecv",
]
ALLOWED = SELECTED + [
    "test_all_reduce_sum",
    "test_all_reduce_product",
    "test_all_reduce_min",
    "test_all_reduce_max",
    "test_all_reduce_full_group_sum",
    "test_all_reduce_full_group_product",
    "test_all_reduce_full_group_min",
    "test_all_reduce_complex_unsupported_ops",
    "test_broadcast",
    "test_all_gather",
    "test_all_gather_complex",
    "test_barrier",
    "test_DistributedDataParallelCPU_grad_is_view",
    "test_DistributedDataParallel_requires_grad",
    "test_get_rank",
    "test_get_backend",
    "test_get_rank_size_full_group",
    "test_destroy_group",
    "test_destroy_full_group",
    "test_reduce_product",
    "test_reduce_min",
    "test_reduce_max",
    "test_reduce_full_group_sum",
    "test_reduce_full_group_product",
    "test_reduce_full_group_min",
    "test_reduce_full_group_max",
    "test_reduce_sum_twice",
    "test_gather_checks",
    "test_gather_full_group",
    "test_scatter_checks",
    "test_scatter_complex",
    "test_scatter_full_group",
    "test_send_recv",
    "test_isend",
]

class TestParoBackend(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


def main() -> int:
    names = sys.argv[1:] or (ALLOWED if os.environ.get("PARO_TORCH_SUITE") == "full" else SELECTED)
    for name in names:
        if not hasattr(TestParoBackend, name):
            raise AttributeError(f"torch_suite.py: torch {torch.__version__} has no test {name}; update the lists")
    result = unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite(TestParoBackend(n) for n in names))
    for test, reason in result.skipped:
        print(f"torch_suite.py: {test} skipped ({reason}); the lists must name tests that run here")
    return 0 if result.wasSuccessful() and not result.skipped else 1


if __name__ == "__main__":
    status = main()
    if MADE_TEMP_DIR:
        shutil.rmtree(MADE_TEMP_DIR, ignore_errors=True)
    sys.exit(status)
