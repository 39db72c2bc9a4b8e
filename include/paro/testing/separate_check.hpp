#pragma once
// Checking a SEPARATE compressor (the host's compression::Separate, the GPU's gpu::Separate) on any
// transport and algorithm: every rank replays, in double, what all ranks of the scope do (a direct
// transcription of the seed's steps 1-5, with the same shared-seed R) and compares its own output and error
// buffer with it, over several steps with error feedback and a reset. The all-reduce's estimate must also
// be bit-identical on every rank. Gradients and outputs live in the transport's memory (device memory on
// a device transport).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/communicator/communicator.hpp"
#include "paro/compression/projection_shape.hpp"
#include "paro/compression/random_stream.hpp"
#include "paro/compression/separate_math.hpp"
#include "paro/compression/separate_options.hpp"

namespace paro::testing {

struct SeparateCase {
  Algorithm algo = Algorithm::automatic;
  Scope scope = Scope::global;
  DataType dt = DataType::f32;
  bool sharded = false;  // reduce_scatter instead of all_reduce
  std::size_t block_cols = 0;
  std::size_t pipeline_chunk_bytes = 96;  // small: several pipelined pieces per call
  std::size_t rows_per_rank = 6;          // of the compressed matrix (40 columns)
  compression::ErrorRule error_rule = compression::ErrorRule::beta_on_residual;
};

inline std::string describe(const SeparateCase& c, int ranks) {
  return detail::concat("SEPARATE ", c.sharded ? "reduce_scatter" : "all_reduce", " algo=", name_of(c.algo),
                        " scope=", name_of(c.scope), " ranks=", ranks, " ", name_of(c.dt), " block_cols=", c.block_cols,
                        " pipeline_chunk_bytes=", c.pipeline_chunk_bytes, " error_rule=", name_of(c.error_rule));
}

// Scope rank m's gradient element i of tensor t at step s.
inline float separate_input(int m, std::size_t t, std::uint32_t s, std::size_t i) {
  return std::sin(0.37f * static_cast<float>(i % 1009) + 1.3f * static_cast<float>(m) + 0.7f * static_cast<float>(t) +
                  0.21f * static_cast<float>(s));
}

// The largest relative errors of a projection P of H and of its reconstruction back = scale / w P R^T,
// against their definitions computed in double from the same R (in the random stream's order), for any
// kernel that computed them (BLAS or loops on the host, cuBLAS on the GPU).
struct ProjectionErrors {
  double projection = 0, reconstruction = 0;
};
inline ProjectionErrors projection_errors(const compression::ProjectionShape& s, const float* r, const float* h,
                                          std::size_t ldh, std::size_t rows, const float* p, std::size_t ldp,
                                          const float* back, double scale) {
  ProjectionErrors worst;
  auto relative = [](double expected, float got) { return std::fabs(expected - got) / (1.0 + std::fabs(expected)); };
  for (std::size_t row = 0; row < rows; ++row) {
    std::size_t at = 0, p_col = 0;
    for (std::size_t j = 0; j < s.blocks(); ++j) {
      const std::size_t b = s.block_size(j), w = s.block_width(j), c0 = s.block_begin(j);
      for (std::size_t k = 0; k < w; ++k) {
        double expected = 0;
        for (std::size_t c = 0; c < b; ++c) expected += static_cast<double>(h[row * ldh + c0 + c]) * r[at + c * w + k];
        worst.projection = std::max(worst.projection, relative(expected, p[row * ldp + p_col + k]));
      }
      for (std::size_t c = 0; c < b; ++c) {
        double expected = 0;
        for (std::size_t k = 0; k < w; ++k)
          expected += static_cast<double>(p[row * ldp + p_col + k]) * r[at + c * w + k];
        expected *= scale / static_cast<double>(w);
        worst.reconstruction = std::max(worst.reconstruction, relative(expected, back[row * ldh + c0 + c]));
      }
      at += b * w;
      p_col += w;
    }
  }
  return worst;
}

namespace separate_check_detail {
// Whether a compressor has the sharded form (reduce_scatter).
template <class S, class Comm, class = void>
struct shards : std::false_type {};
template <class S, class Comm>
struct shards<S, Comm,
              std::void_t<decltype(std::declval<S&>().reduce_scatter(
                  std::declval<Comm&>(), std::declval<const std::vector<compression::SeparateGradient>&>()))>>
    : std::true_type {};
}  // namespace separate_check_detail

template <class Separate, class Transport>
std::vector<std::string> check_separate(Communicator<Transport>& comm, const SeparateCase& c) {
  auto& world = comm.transport();
  auto& scoped = comm.transport(c.scope);
  const int n = scoped.size(), me = scoped.rank();
  const auto un = static_cast<std::size_t>(n);
  compression::SeparateOptions o;
  o.ratio = 8;
  o.min_elements = 200;
  o.block_cols = c.block_cols;
  o.pipeline_chunk_bytes = c.pipeline_chunk_bytes;
  o.error_rule = c.error_rule;
  o.reset_every = 3;
  o.collective = {c.algo, c.scope};
  Separate sep(o);
  // A compressed matrix, then a vector and a small matrix (< 200 elements up to 16 ranks) that stay
  // uncompressed; rows divisible by n.
  struct Shape {
    std::size_t rows, cols;
  };
  const std::vector<Shape> shapes = {{c.rows_per_rank * un, 40}, {1, 10 * un}, {2 * un, 5}};
  for (std::size_t t = 0; t < shapes.size(); ++t)
    sep.add("t" + std::to_string(t), shapes[t].rows, shapes[t].cols, c.dt);
  std::vector<std::string> failures;
  auto fail = [&](auto&&... what) {
    if (failures.size() < 8) failures.push_back(detail::concat(describe(c, n), " rank ", me, ": ", what...));
  };
  // Replayed state: every scope rank's error buffer per tensor, in double.
  std::vector<std::vector<std::vector<double>>> error(shapes.size(), std::vector<std::vector<double>>(un));
  for (std::size_t t = 0; t < shapes.size(); ++t)
    for (auto& e : error[t]) e.assign(shapes[t].rows * shapes[t].cols, 0.0);
  const double tolerance = c.dt == DataType::f32 ? 2e-4 : c.dt == DataType::f16 ? 4e-3 : 3e-2;

  for (std::uint32_t step = 0; step < 5; ++step) {
    visit_data_type(c.dt, [&](auto zero) {
      using T = decltype(zero);
      std::vector<std::vector<T>> outs(shapes.size());
      using Buffer = decltype(world.allocate(std::size_t{}));
      std::vector<Buffer> grad_buffers, out_buffers;
      std::vector<compression::SeparateGradient> call;
      for (std::size_t t = 0; t < shapes.size(); ++t) {
        const std::size_t count = shapes[t].rows * shapes[t].cols;
        std::vector<T> grad;
        for (std::size_t i = 0; i < count; ++i) grad.push_back(T(separate_input(me, t, step, i)));
        outs[t].assign(c.sharded ? count / un : count, T(0.0f));
        grad_buffers.push_back(world.allocate(count * sizeof(T)));
        out_buffers.push_back(world.allocate(outs[t].size() * sizeof(T)));
        world.upload(grad_buffers.back().data(), grad.data(), count * sizeof(T));
        call.push_back({t, grad_buffers.back().data(), out_buffers.back().data()});
      }
      if constexpr (separate_check_detail::shards<Separate, Communicator<Transport>>::value) {
        if (c.sharded)
          sep.reduce_scatter(comm, call);
        else
          sep.all_reduce(comm, call);
      } else {
        detail::require(!c.sharded, "check_separate: this compressor has no reduce_scatter");
        sep.all_reduce(comm, call);
      }
      for (std::size_t t = 0; t < shapes.size(); ++t)
        world.download(outs[t].data(), out_buffers[t].data(), outs[t].size() * sizeof(T));

      for (std::size_t t = 0; t < shapes.size(); ++t) {
        const auto& info = sep.tensor(t);
        const std::size_t rows = shapes[t].rows, cols = shapes[t].cols, count = rows * cols;
        // Every rank's h (its gradient as stored in T, plus its error) and the expected mean estimate.
        std::vector<std::vector<double>> h(un, std::vector<double>(count));
        for (std::size_t m = 0; m < un; ++m)
          for (std::size_t i = 0; i < count; ++i)
            h[m][i] = static_cast<float>(T(separate_input(static_cast<int>(m), t, step, i))) + error[t][m][i];
        std::vector<double> expected(count, 0.0);
        std::vector<std::vector<double>> local(un, std::vector<double>(count, 0.0));  // P_m R^T / w
        if (!info.compressed) {
          for (std::size_t m = 0; m < un; ++m)
            for (std::size_t i = 0; i < count; ++i) expected[i] += h[m][i] / n;
        } else {
          const auto& s = info.shape;
          std::vector<float> r(s.random_count());
          compression::fill(o.distribution, {o.seed, step, static_cast<std::uint32_t>(t)}, 0, r.data(), r.size());
          std::size_t r_at = 0;
          for (std::size_t j = 0; j < s.blocks(); ++j) {
            const std::size_t b = s.block_size(j), w = s.block_width(j), c0 = s.block_begin(j);
            for (std::size_t row = 0; row < rows; ++row)
              for (std::size_t m = 0; m < un; ++m)
                for (std::size_t v = 0; v < w; ++v) {
                  double p = 0;
                  for (std::size_t k = 0; k < b; ++k) p += h[m][row * cols + c0 + k] * r[r_at + k * w + v];
                  for (std::size_t k = 0; k < b; ++k) {
                    const double back = p * r[r_at + k * w + v] / static_cast<double>(w);
                    local[m][row * cols + c0 + k] += back;
                    expected[row * cols + c0 + k] += back / n;
                  }
                }
            r_at += b * w;
          }
          const bool reset = step % o.reset_every == 0;
          for (std::size_t m = 0; m < un; ++m)
            for (std::size_t i = 0; i < count; ++i) {
              const double target = c.sharded ? local[m][i] : expected[i];
              const double fresh = h[m][i] - target;
              error[t][m][i] = reset ? 0.0
                               : c.error_rule == compression::ErrorRule::beta_on_residual
                                   ? (1 - o.beta) * error[t][m][i] + o.beta * fresh
                                   : o.beta * error[t][m][i] + (1 - o.beta) * fresh;
            }
          const auto& mine = sep.error(t);
          const auto& ref = error[t][static_cast<std::size_t>(me)];
          for (std::size_t i = 0; i < count; ++i)
            if (std::fabs(mine[i] - ref[i]) > tolerance * (1 + std::fabs(ref[i]))) {
              fail("step ", step, " tensor ", t, " error[", i, "] = ", mine[i], ", expected ", ref[i]);
              break;
            }
        }
        const std::size_t first = c.sharded ? static_cast<std::size_t>(me) * (count / un) : 0;
        double scale = 0;
        for (double v : expected) scale = std::max(scale, std::fabs(v));
        for (std::size_t i = 0; i < outs[t].size(); ++i) {
          const double got = static_cast<float>(outs[t][i]), want = expected[first + i];
          if (std::fabs(got - want) > tolerance * (scale + std::fabs(want))) {
            fail("step ", step, " tensor ", t, " out[", i, "] = ", got, ", expected ", want);
            break;
          }
        }
        if (c.sharded) continue;
        // The same bits everywhere: compare a checksum's minimum and maximum over the scope.
        std::uint64_t sum = 0;
        for (const T& v : outs[t]) {
          std::uint32_t bits = 0;
          const float f = static_cast<float>(v);
          std::memcpy(&bits, &f, sizeof bits);
          sum = sum * 31 + bits;
        }
        const std::int64_t mine = static_cast<std::int64_t>(sum >> 1);
        std::int64_t lo = mine, hi = mine;
        auto extreme = world.allocate(sizeof mine);
        auto* at = reinterpret_cast<std::int64_t*>(extreme.data());
        world.upload(at, &mine, sizeof mine);
        comm.all_reduce(at, at, 1, ReduceOp::min, {Algorithm::ring, c.scope});
        world.download(&lo, at, sizeof lo);
        world.upload(at, &mine, sizeof mine);
        comm.all_reduce(at, at, 1, ReduceOp::max, {Algorithm::ring, c.scope});
        world.download(&hi, at, sizeof hi);
        if (lo != hi) fail("step ", step, " tensor ", t, ": ranks hold different estimates");
      }
    });
  }
  return failures;
}

}  // namespace paro::testing
