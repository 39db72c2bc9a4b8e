#pragma once
// What the GPU tests share: skipping where fewer GPUs are usable than a test needs (with CUDA's reason),
// and running a body on n thread ranks over NCCL.

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "paro/communicator/communicator.hpp"
#include "paro/cuda/runtime.hpp"
#include "paro/transport/nccl.hpp"
#include "paro/transport/threads.hpp"

#define PARO_REQUIRE_GPUS(n)                                                                   \
  do {                                                                                         \
    const int gpus_ = paro::cuda::device_count();                                              \
    if (gpus_ == 0) GTEST_SKIP() << "no usable GPU: " << paro::cuda::device_census().why_none; \
    if (gpus_ < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs, found " << gpus_;              \
  } while (0)

namespace paro::testing {

// n thread ranks, each with its own GPU and an NCCL communicator bootstrapped over the threads backend.
template <class Body>
std::vector<std::string> on_nccl(int n, const std::string& emulate, Body body) {
  std::mutex mutex;
  std::vector<std::string> failures;
  paro::threads::run(n, [&](paro::threads::Transport host) {
    paro::CommunicatorConfig config;
    config.discovery.emulate = emulate;
    paro::Communicator comm(paro::nccl::Transport::bootstrap(host, host.rank()), config);
    std::vector<std::string> mine = body(comm);
    std::lock_guard<std::mutex> lock(mutex);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  return failures;
}

}  // namespace paro::testing
