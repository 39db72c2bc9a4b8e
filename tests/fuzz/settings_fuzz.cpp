// libFuzzer target: the settings read from the environment. The first byte picks the parser, the rest is
// the value: PARO_EMULATE (then the ranks placed and grouped), PARO_ALGO, PARO_GROUP (then groups made on
// an emulated 2 x 3 cluster), PARO_FAULT.
#include <string_view>

#include "fuzz_input.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/topology/emulation.hpp"
#include "paro/topology/grouping.hpp"
#include "paro/transport/faults.hpp"

namespace {

void emulate(std::string_view text) {
  const auto spec = paro::topology::EmulationSpec::parse(text);
  // Place as many ranks as the spec describes, or one per node, where that stays small enough to be quick.
  const int ranks = spec.rank_count().value_or(spec.total_nodes());
  if (ranks > 4096) return;
  const paro::Topology topo = spec.place(ranks);
  for (paro::Level level : paro::all_levels) (void)paro::Groups::make(topo, paro::GroupSpec::by(level));
}

void group(std::string_view text) {
  const paro::GroupSpec spec = paro::GroupSpec::parse(text, text.size() % 2 == 1);
  const auto topo = paro::topology::EmulationSpec::parse("nodes=2,ranks=3").place(6);
  (void)paro::Groups::make(topo, spec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  return paro::fuzz::refusing_only_with_paro_errors(data + 1, size - 1, [&](const std::string& text) {
    switch (data[0] % 4) {
      case 0: emulate(text); break;
      case 1: (void)paro::AlgorithmOverrides::parse(text); break;
      case 2: group(text); break;
      case 3: (void)paro::faults::FaultSpec::parse(text); break;
    }
  });
}
