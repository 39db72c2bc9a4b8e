// libFuzzer target: PARO_TOPO_FILE's JSON (topology/topology_file.hpp), then the groups of what it describes.
#include "fuzz_input.hpp"
#include "paro/topology/grouping.hpp"
#include "paro/topology/topology_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return paro::fuzz::refusing_only_with_paro_errors(data, size, [](const std::string& text) {
    const auto file = paro::topology::TopologyFile::parse_text(text, "fuzz.json");
    (void)file.gives_switch();
    (void)file.gives_pod();
  });
}
