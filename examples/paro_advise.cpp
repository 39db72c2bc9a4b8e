// paro-advise: ranks the 14 PaRO-DP strategies for a model on a cluster by predicted step time among
// those that fit in memory (dp/model.hpp: T = max(t_comm, t_comp), the guideline of the PaRO paper,
// arXiv:2310.06003; docs/paro-dp.md).
//
//   paro-advise --params 7e9 --gpus 32 --group 8 --memory-gb 80 --intra-gbps 1200 --inter-gbps 12.5
//   paro-advise --params 7e9 --trainable-ratio 0.1 --gpus 32 --group 8 --json advice.json
//
// Bandwidths are per GPU (e.g. one 100 Gbit/s NIC shared by 8 GPUs: --inter-gbps 12.5). Memory counts
// parameters, gradients and optimizer states (mixed precision: 2 + 2 + 12 bytes per trainable parameter,
// or --precision fp32: 4 + 4 + 8), the transient gathered parameters and full gradients of a micro-step,
// and --activation-gb.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "paro/dp/model.hpp"

int main(int argc, char** argv) {
  double params = 7e9, trainable_ratio = 1.0, memory_gb = 80, intra_gbps = 1200, inter_gbps = 12.5, tflops = 150,
         tokens = 2048, activation_gb = 0;
  int gpus = 32, group = 8, accumulation = 4;
  std::string precision = "mixed", json_path;
  CLI::App app{"paro-advise: rank PaRO-DP strategies by predicted step time among those that fit"};
  app.add_option("--params", params, "model parameters (Ψ)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--trainable-ratio", trainable_ratio, "trainable fraction Ψ'/Ψ")
      ->capture_default_str()
      ->check(CLI::Range(1e-9, 1.0));
  app.add_option("--gpus", gpus, "GPUs (n)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--group", group, "GPUs per group (m), e.g. per node")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--memory-gb", memory_gb, "memory per GPU, GB")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--intra-gbps", intra_gbps, "per-GPU bandwidth inside a group, Gbit/s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--inter-gbps", inter_gbps, "per-GPU bandwidth between groups, Gbit/s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--tflops", tflops, "sustained TFLOP/s per GPU")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--tokens", tokens, "tokens per GPU and micro-step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--accum", accumulation, "micro-steps per step (A)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--activation-gb", activation_gb, "activation memory per GPU, GB")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--precision", precision, "mixed (2/2/12 bytes) or fp32 (4/4/8)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mixed", "fp32"}));
  app.add_option("--json", json_path, "write the ranking as JSON");
  CLI11_PARSE(app, argc, argv);

  try {
    const paro::dp::Sizes z{static_cast<std::size_t>(params), static_cast<std::size_t>(params * trainable_ratio)};
    const paro::dp::Cluster c{gpus, group};
    paro::dp::Machine mc;
    mc.memory_bytes = memory_gb * 1e9;
    mc.intra_bytes_per_s = intra_gbps * 1e9 / 8;
    mc.inter_bytes_per_s = inter_gbps * 1e9 / 8;
    mc.flops = tflops * 1e12;
    mc.tokens = tokens;
    mc.activation_bytes = activation_gb * 1e9;
    const auto bytes = precision == "mixed" ? paro::dp::ElementBytes::mixed_precision() : paro::dp::ElementBytes{};
    const auto ranked = paro::dp::advise(z, c, accumulation, mc, bytes);
    std::printf(
        "# paro-advise: %.3g parameters (%.3g trainable), %d GPUs in groups of %d, %.0f GB each, %g / %g Gbit/s "
        "per GPU inside / between groups, %g TFLOP/s, %g tokens x %d micro-steps, %s precision\n",
        params, params * trainable_ratio, gpus, group, memory_gb, intra_gbps, inter_gbps, tflops, tokens, accumulation,
        precision.c_str());
    std::printf("# %4s  %-8s  %4s  %11s  %12s  %12s  %9s  %9s  %9s\n", "rank", "strategy", "fits", "memory(GB)",
                "intra(GB)", "inter(GB)", "comm(s)", "comp(s)", "step(s)");
    nlohmann::json out = nlohmann::json::array();
    int position = 0;
    for (const auto& a : ranked) {
      std::printf("  %4d  %-8s  %4s  %11.1f  %12.2f  %12.2f  %9.3f  %9.3f  %9.3f\n", ++position,
                  a.strategy.name().c_str(), a.fits ? "yes" : "no", (a.memory.peak() + mc.activation_bytes) / 1e9,
                  a.bytes.intra / 1e9, a.bytes.inter / 1e9, a.comm_s, a.comp_s, a.step_s);
      out.push_back({{"strategy", a.strategy.name()},
                     {"fits", a.fits},
                     {"memory_bytes", a.memory.peak() + mc.activation_bytes},
                     {"intra_bytes", a.bytes.intra},
                     {"inter_bytes", a.bytes.inter},
                     {"comm_s", a.comm_s},
                     {"comp_s", a.comp_s},
                     {"step_s", a.step_s}});
    }
    std::printf(
        "# memory: parameters, gradients, optimizer states and a micro-step's gathered parameters and full "
        "gradients; intra/inter: bytes each GPU sends per step; step = max(comm, comp)\n");
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      paro::detail::require(static_cast<bool>(f), "--json: cannot write '", json_path, "'");
      f << out.dump(1) << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paro-advise: %s\n", e.what());
    return 2;
  }
}
