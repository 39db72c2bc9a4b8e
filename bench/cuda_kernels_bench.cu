// paro-cuda-kernels-bench: the bandwidth of paro's reduce kernel (dst = a op b: two reads and a write per
// element) beside a device-to-device cudaMemcpy (a read and a write) measured in the same run, so that the
// kernel is judged against what the memory system gives on this GPU. The kernel moves 16-byte vectors;
// "1x" is bf16 with misaligned operands, one element per load.
//
//   paro-cuda-kernels-bench [--json FILE] [--max-bytes BYTES]
//
// Bandwidth = bytes moved / time, GB = 1e9. Without a GPU it says so, writes {"gpu": false, ...} and exits 0.

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "paro/cuda/kernels.cuh"
#include "paro/cuda/runtime.hpp"

namespace {

struct Result {
  std::string what;
  std::size_t bytes;  // of one operand
  double us, gbps;
};

template <class F>
double time_us(cudaStream_t s, int iters, F&& f) {
  cudaEvent_t start, stop;
  paro::cuda::check(cudaEventCreate(&start), "cudaEventCreate");
  paro::cuda::check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) f();  // warm-up
  paro::cuda::check(cudaEventRecord(start, s), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) f();
  paro::cuda::check(cudaEventRecord(stop, s), "cudaEventRecord");
  paro::cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  paro::cuda::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1e3 * ms / iters;
}

std::string json_of(const std::vector<Result>& results, const std::string& device) {
  std::string out = "{\"gpu\": true, \"device\": \"" + device + "\", \"results\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    char line[256];
    std::snprintf(line, sizeof line, "%s{\"what\": \"%s\", \"bytes\": %zu, \"time_us\": %.3f, \"GBps\": %.2f}",
                  i ? ", " : "", results[i].what.c_str(), results[i].bytes, results[i].us, results[i].gbps);
    out += line;
  }
  return out + "]}";
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  std::size_t max_bytes = std::size_t{1} << 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc)
      json_path = argv[++i];
    else if (arg == "--max-bytes" && i + 1 < argc)
      max_bytes = paro::env::parse_bytes(argv[++i], "--max-bytes");
    else {
      std::fprintf(stderr, "usage: paro-cuda-kernels-bench [--json FILE] [--max-bytes BYTES]\n");
      return 2;
    }
  }
  auto write = [&](const std::string& text) {
    if (json_path.empty()) return;
    std::ofstream(json_path) << text << "\n";
  };
  if (paro::cuda::device_count() == 0) {
    const std::string why = paro::cuda::device_census().why_none;
    std::printf("# no usable GPU (%s): nothing measured\n", why.c_str());
    write("{\"gpu\": false, \"reason\": \"" + why + "\"}");
    return 0;
  }
  try {
    paro::cuda::set_device(0);
    cudaDeviceProp prop{};
    paro::cuda::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    paro::cuda::Stream stream(0);
    std::vector<Result> results;
    std::printf("# %s\n# %12s  %-22s  %10s  %10s\n", prop.name, "bytes", "operation", "time(us)", "GB/s");
    for (std::size_t bytes = std::size_t{1} << 20; bytes <= max_bytes; bytes *= 8) {
      paro::cuda::DeviceBuffer a(0, bytes), b(0, bytes), dst(0, bytes);
      paro::cuda::check(cudaMemset(a.data(), 0, bytes), "cudaMemset");
      paro::cuda::check(cudaMemset(b.data(), 0, bytes), "cudaMemset");
      const int iters = bytes >= (std::size_t{64} << 20) ? 20 : 100;
      auto add = [&](const std::string& what, double moved, double us) {
        results.push_back({what, bytes, us, moved / us / 1e3});
        std::printf("  %12zu  %-22s  %10.2f  %10.1f\n", bytes, what.c_str(), us, moved / us / 1e3);
      };
      add("cudaMemcpy d2d", 2.0 * bytes, time_us(stream.get(), iters, [&] {
            paro::cuda::check(cudaMemcpyAsync(dst.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()),
                              "cudaMemcpyAsync");
          }));
      for (paro::DataType dt :
           {paro::DataType::f32, paro::DataType::f16, paro::DataType::bf16, paro::DataType::f64, paro::DataType::i8}) {
        const std::size_t count = bytes / paro::size_of(dt);
        add(std::string("reduce sum ") + paro::name_of(dt), 3.0 * bytes, time_us(stream.get(), iters, [&] {
              paro::cuda::reduce_async(dst.data(), a.data(), b.data(), count, dt, paro::ReduceOp::sum, stream.get());
            }));
      }
      // dst one element off a's and b's alignment: no 16-byte vectors, every element loaded on its own.
      const std::size_t count = bytes / 2 - 1;
      add("reduce sum bfloat16 1x", 6.0 * count, time_us(stream.get(), iters, [&] {
            paro::cuda::reduce_async(dst.data() + 2, a.data(), b.data(), count, paro::DataType::bf16,
                                     paro::ReduceOp::sum, stream.get());
          }));
    }
    write(json_of(results, prop.name));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paro-cuda-kernels-bench: %s\n", e.what());
    return 2;
  }
}
