// libFuzzer target: PARO_COST_FILE's JSON (algorithms/cost/link_sources.hpp). What it accepts must survive the
// round trip through to_json (the form paro-bench --calibrate writes) unchanged.
#include <cstdlib>

#include "fuzz_input.hpp"
#include "paro/algorithms/cost/link_sources.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return paro::fuzz::refusing_only_with_paro_errors(data, size, [](const std::string& text) {
    using paro::algorithms::parse_cost_file;
    using paro::algorithms::to_json;
    const std::string written = to_json(parse_cost_file(text, "fuzz.json"));
    try {
      if (to_json(parse_cost_file(written, "written.json")) != written) std::abort();
    } catch (const paro::Error&) {
      std::abort();  // a model that was accepted, written back, and then refused
    }
  });
}
