// libFuzzer target: the DeepSpeed-style config of paro-train (dp/deepspeed_config.hpp).
#include "fuzz_input.hpp"
#include "paro/dp/deepspeed_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return paro::fuzz::refusing_only_with_paro_errors(data, size, [](const std::string& text) {
    const auto config = paro::dp::DeepSpeedConfig::parse(text, "fuzz.json");
    if (config.strategy) (void)config.strategy->name();
  });
}
