// GPU tests, one CUDA translation unit: paro's kernels against the host reduce for every data type and
// op; the threads backend over device memory running every algorithm through the generic checks of
// collective_check.hpp (the same bodies as the host tests, on emulated clusters); the nccl backend
// bootstrapped over thread ranks, one GPU per rank; the transport conformance suite on both. Without a
// usable GPU every test reports SKIPPED.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gpu_harness.hpp"
#include "paro/cuda/kernels.cuh"
#include "paro/testing/collective_check.hpp"
#include "paro/testing/transport_check.hpp"
#include "paro/transport/nccl.hpp"
#include "paro/transport/threads_cuda.cuh"
#include "threads_harness.hpp"

namespace {

using paro::Algorithm;
using paro::Collective;
using paro::DataType;
using paro::ReduceOp;
using paro::Scope;

using paro::tools::DeviceThreads;

// --- kernels -------------------------------------------------------------------------------------------

// A NaN of T with the sign and payload bits of r (the exponent all ones, the lowest payload bit set).
template <class T>
T nan_with(std::uint64_t r) {
  if constexpr (std::is_same_v<T, paro::f16>) {
    return T::from_bits(static_cast<std::uint16_t>(r | 0x7C01u));
  } else if constexpr (std::is_same_v<T, paro::bf16>) {
    return T::from_bits(static_cast<std::uint16_t>(r | 0x7F81u));
  } else if constexpr (std::is_same_v<T, float>) {
    const auto u = static_cast<std::uint32_t>(r | 0x7F800001u);
    T t;
    std::memcpy(&t, &u, sizeof t);
    return t;
  } else {
    const std::uint64_t u = r | 0x7FF0000000000001ull;
    T t;
    std::memcpy(&t, &u, sizeof t);
    return t;
  }
}

// Bit patterns that cover every case of the element semantics: small and huge values, negative ones,
// wrap-around for integers, and for floats infinities, NaNs of any sign and payload (CUDA's arithmetic
// gives a NaN of its own, x86 keeps one of the inputs'), signed zeros and subnormals.
std::vector<unsigned char> probe_bytes(DataType dt, std::size_t count, unsigned seed) {
  std::vector<unsigned char> bytes(count * paro::size_of(dt));
  paro::visit_data_type(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(bytes.data());
    std::uint32_t x = seed * 2654435761u + 12345u;
    for (std::size_t i = 0; i < count; ++i) {
      x = x * 1664525u + 1013904223u;
      const int pick = static_cast<int>(x >> 28);
      const float value = pick < 8     ? static_cast<float>(static_cast<int>(x % 2001) - 1000) / 8.0f
                          : pick == 8  ? 1e30f
                          : pick == 9  ? -0.0f
                          : pick == 10 ? 1e-40f
                          : pick == 11 ? (i % 2 ? 1.0f / 0.0f : -1.0f / 0.0f)
                                       : static_cast<float>(static_cast<int>(x % 300) - 150);
      if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(static_cast<std::int64_t>(x) - (1ll << 31));
      } else if (pick == 12) {
        p[i] = nan_with<T>(std::uint64_t{x} << 32 | (x * 2246822519u));
      } else {
        p[i] = T(value);
      }
    }
  });
  return bytes;
}

template <class F>
std::vector<unsigned char> on_device(const std::vector<std::vector<unsigned char>>& inputs, std::size_t out_bytes,
                                     F&& f) {
  std::vector<paro::cuda::DeviceBuffer> buffers;
  for (const auto& in : inputs) {
    buffers.emplace_back(0, in.size());
    paro::cuda::check(cudaMemcpy(buffers.back().data(), in.data(), in.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  paro::cuda::DeviceBuffer out(0, out_bytes);
  f(buffers, out.data());
  paro::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<unsigned char> result(out_bytes);
  paro::cuda::check(cudaMemcpy(result.data(), out.data(), out_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return result;
}

using KernelParam = std::tuple<DataType, ReduceOp>;
class CudaKernels : public ::testing::TestWithParam<KernelParam> {};

// Counts below, around and far above a 16-byte vector; operands equally far from a 16-byte boundary
// (elements one by one up to it, then vectors) or not (every element one by one).
TEST_P(CudaKernels, ReduceMatchesHostBitForBit) {
  PARO_REQUIRE_GPUS(1);
  const DataType dt = std::get<0>(GetParam());
  const ReduceOp op = std::get<1>(GetParam());
  const std::size_t size = paro::size_of(dt);
  struct Offsets {
    std::size_t a, b, dst;  // elements from the start of each buffer
  };
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{3u << 20}})
    for (Offsets o : {Offsets{0, 0, 0}, Offsets{1, 1, 1}, Offsets{3, 3, 3}, Offsets{0, 1, 2}}) {
      const auto a = probe_bytes(dt, count + 3, 1), b = probe_bytes(dt, count + 3, 2);
      std::vector<unsigned char> want(count * size);
      paro::host_reduce(want.data(), a.data() + o.a * size, b.data() + o.b * size, count, dt, op);
      const auto got = on_device({a, b}, a.size(), [&](auto& in, char* out) {
        paro::cuda::reduce_async(out + o.dst * size, in[0].data() + o.a * size, in[1].data() + o.b * size, count, dt,
                                 op, nullptr);
      });
      EXPECT_EQ(0, std::memcmp(want.data(), got.data() + o.dst * size, want.size()))
          << paro::name_of(dt) << " " << paro::name_of(op) << " count " << count << " offsets " << o.a << " " << o.b
          << " " << o.dst;
    }
}

TEST_P(CudaKernels, DivideMatchesHostBitForBit) {
  PARO_REQUIRE_GPUS(1);
  const DataType dt = std::get<0>(GetParam());
  if (std::get<1>(GetParam()) != ReduceOp::avg) GTEST_SKIP() << "divide is avg's step";
  for (int divisor : {1, 3, 7, 16}) {
    const std::size_t count = 100003;
    auto want = probe_bytes(dt, count, 3);
    const auto got = on_device({want}, want.size(), [&](auto& in, char* out) {
      paro::cuda::check(cudaMemcpy(out, in[0].data(), want.size(), cudaMemcpyDeviceToDevice), "cudaMemcpy");
      paro::cuda::divide_async(out, count, dt, divisor, nullptr);
    });
    paro::host_divide(want.data(), count, dt, divisor);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size())) << paro::name_of(dt) << " / " << divisor;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryTypeAndOp, CudaKernels,
                         ::testing::Combine(::testing::ValuesIn(paro::all_data_types),
                                            ::testing::ValuesIn(paro::all_reduce_ops)),
                         [](const auto& info) {
                           return std::string(paro::name_of(std::get<0>(info.param))) + "_" +
                                  paro::name_of(std::get<1>(info.param));
                         });

TEST(CudaKernelsStrided, PackThenUnpackRestoresShards) {
  PARO_REQUIRE_GPUS(1);
  for (std::size_t shard : {std::size_t{3}, std::size_t{64}, std::size_t{4096}}) {
    const std::size_t shards = 7, stride = shard * 3 + 4;
    std::vector<unsigned char> src(stride * shards);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
    const auto packed = on_device({src}, shard * shards, [&](auto& in, char* out) {
      paro::cuda::pack_async(out, in[0].data(), stride, shard, shards, nullptr);
    });
    for (std::size_t k = 0; k < shards; ++k)
      EXPECT_EQ(0, std::memcmp(packed.data() + k * shard, src.data() + k * stride, shard)) << "shard " << k;
    const auto unpacked = on_device({packed}, stride * shards, [&](auto& in, char* out) {
      paro::cuda::check(cudaMemset(out, 0, stride * shards), "cudaMemset");
      paro::cuda::unpack_async(out, stride, in[0].data(), shard, shards, nullptr);
    });
    for (std::size_t k = 0; k < shards; ++k)
      EXPECT_EQ(0, std::memcmp(unpacked.data() + k * stride, src.data() + k * stride, shard)) << "shard " << k;
  }
}

TEST(CudaKernelsErrors, BadArgumentsAreParoErrors) {
  PARO_REQUIRE_GPUS(1);
  EXPECT_THROW(paro::cuda::divide_async(nullptr, 10, DataType::f32, 0, nullptr), paro::Error);
  EXPECT_THROW(
      paro::cuda::reduce_async(nullptr, nullptr, nullptr, 1, static_cast<DataType>(99), ReduceOp::sum, nullptr),
      paro::Error);
}

// --- the threads backend over device memory ------------------------------------------------------------

// The device threads backend has no native collectives: every other algorithm, and automatic.
const auto device_algorithms = paro::algorithms::BuiltinAlgorithms::portable_and_automatic();
using paro::all_collectives;

// (emulated cluster, scope): every algorithm, collective, data type and op, counts 0 / 1 / odd, exact values.
using ClusterParam = std::tuple<const char*, Scope>;
class DeviceThreadsExact : public ::testing::TestWithParam<ClusterParam> {};

TEST_P(DeviceThreadsExact, EveryAlgorithmTypeAndOp) {
  PARO_REQUIRE_GPUS(1);
  auto [emulate, scope] = GetParam();
  auto failures = paro::testing::on_cluster<DeviceThreads>(emulate, "node", [&, scope = scope](auto& comm) {
    std::vector<std::string> f;
    for (Collective coll : all_collectives)
      for (Algorithm algo : device_algorithms)
        for (auto& s : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 1000}, scope)) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Emulated, DeviceThreadsExact,
                         ::testing::Combine(::testing::Values("nodes=2,ranks=4",              // 8 ranks, 2 x 4
                                                              "nodes=3,ranks=1",              // flat: 3 ranks
                                                              "nodes=2,ranks=3:2",            // uneven groups
                                                              "switches=2,nodes=2,ranks=2"),  // three levels
                                            ::testing::Values(Scope::global, Scope::inter)));

// Multi-MiB buffers: ring chunks and paro_cc pipeline pieces on device memory.
TEST(DeviceThreadsLarge, PipelinedChunks) {
  PARO_REQUIRE_GPUS(1);
  auto failures = paro::testing::on_cluster<DeviceThreads>("nodes=2,ranks=4", "node", [](auto& comm) {
    std::vector<std::string> f;
    for (Collective coll : all_collectives)
      for (Algorithm algo : device_algorithms) {
        const std::size_t count =
            coll == Collective::all_reduce ? (std::size_t{4} << 20) + 3 : (std::size_t{4} << 20) / comm.size() + 3;
        for (auto dt : {DataType::f32, DataType::bf16})
          for (bool in_place : {false, true}) {
            auto msg = paro::testing::run_case(comm, {coll, algo, dt, ReduceOp::sum, count, in_place});
            if (!msg.empty()) f.push_back(msg);
          }
      }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// A host pointer where device memory is expected is reported, not a crash or a hang.
// The transport conformance suite (paro/testing/transport_check.hpp) over device memory; ranks share GPUs.
class DeviceThreadsTransport : public ::testing::TestWithParam<int> {};

TEST_P(DeviceThreadsTransport, Conformance) {
  PARO_REQUIRE_GPUS(1);
  auto failures = paro::testing::on_transports<DeviceThreads>(
      GetParam(), [](paro::threads::DeviceTransport t) { return paro::testing::check_transport_conformance(t); });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceThreadsTransport, ::testing::Values(1, 2, 3, 4));

TEST(DeviceThreadsErrors, RunWithoutGpuIsAnError) {
  if (paro::cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(paro::threads::run_on_devices(2, [](auto) {}), paro::Error);
}

// Spins for about `cycles` clock ticks, then fills buf: input that is still being written when the host
// issues the collective.
__global__ void fill_late(float* buf, std::size_t count, float value, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) buf[i] = value;
}

// Options::inputs_ready = cuda::after_stream(s): the collective waits for the kernel that writes its input
// on the caller's stream (paro's streams are non-blocking and would not).
TEST(DeviceThreadsStreams, CollectiveWaitsForTheCallersStream) {
  PARO_REQUIRE_GPUS(1);
  constexpr std::size_t count = 1 << 20;
  auto failures = paro::testing::on_threads<DeviceThreads>(2, [](auto& comm) {
    paro::cuda::DeviceBuffer in(comm.transport().device(), count * sizeof(float)),
        out(comm.transport().device(), count * sizeof(float));
    cudaStream_t caller = nullptr;
    paro::cuda::check(cudaStreamCreateWithFlags(&caller, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    fill_late<<<64, 256, 0, caller>>>(reinterpret_cast<float*>(in.data()), count, comm.rank() + 1.0f, 200000000LL);
    paro::Options o(Algorithm::ring);
    o.inputs_ready = paro::cuda::after_stream(caller);
    comm.all_reduce(reinterpret_cast<const float*>(in.data()), reinterpret_cast<float*>(out.data()), count,
                    ReduceOp::sum, o);
    std::vector<float> got(count);
    paro::cuda::check(cudaMemcpy(got.data(), out.data(), count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    cudaStreamDestroy(caller);
    std::vector<std::string> f;
    for (std::size_t i = 0; i < count; ++i)
      if (got[i] != 3.0f) {
        f.push_back("element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", want 3");
        break;
      }
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// --- the nccl backend ----------------------------------------------------------------------------------

class NcclTransport : public ::testing::TestWithParam<int> {};

TEST_P(NcclTransport, EveryAlgorithmIncludingNative) {
  const int n = GetParam();
  PARO_REQUIRE_GPUS(n);
  const std::string emulate = n % 2 == 0 && n > 2 ? "nodes=2" : "nodes=1";
  auto failures = paro::testing::on_nccl(n, emulate, [](auto& comm) {
    std::vector<std::string> f;
    for (Collective coll : all_collectives)
      for (Algorithm algo : paro::all_algorithms)
        for (auto& s : paro::testing::run_matrix(comm, coll, algo, {0, 1, 7, 1000, 100003})) f.push_back(s);
    return f;
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

// The transport conformance suite on nccl (stepwise: no receive posted ahead of its step).
TEST_P(NcclTransport, Conformance) {
  const int n = GetParam();
  PARO_REQUIRE_GPUS(n);
  auto failures = paro::testing::on_transports(n, [](paro::threads::Transport host) {
    auto t = paro::nccl::Transport::bootstrap(host, host.rank());
    return paro::testing::check_transport_conformance(t);
  });
  EXPECT_TRUE(failures.empty()) << paro::testing::first_lines(failures);
}

INSTANTIATE_TEST_SUITE_P(RankCounts, NcclTransport, ::testing::Values(1, 2, 4, 8));

// A peer that never answers: the wait becomes a paro::Error after PARO_TIMEOUT, and the communicator is aborted.
TEST(NcclTransportErrors, MissingPeerTimesOut) {
  PARO_REQUIRE_GPUS(2);
  setenv("PARO_TIMEOUT", "3", 1);
  std::string error;
  paro::threads::run(2, [&](paro::threads::Transport host) {
    auto t = paro::nccl::Transport::bootstrap(host, host.rank());
    char token = 0;
    if (t.rank() == 1) {  // stays alive (over the host transport) until rank 0 has given up
      auto done = host.irecv(&token, 1, 0, 7);
      host.wait(done);
      return;
    }
    paro::cuda::DeviceBuffer buf(t.device(), 64);
    auto r = t.irecv(buf.data(), 64, 1, 0);
    try {
      t.wait(r);
    } catch (const paro::Error& e) {
      error = e.what();
    }
    auto done = host.isend(&token, 1, 1, 7);
    host.wait(done);
  });
  unsetenv("PARO_TIMEOUT");
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
}

}  // namespace
