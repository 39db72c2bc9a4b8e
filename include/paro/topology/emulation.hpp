#pragma once
// PARO_EMULATE: a cluster tree for ranks that all run on one machine, so that every grouping can be
// tested and benchmarked anywhere.
//
//   pods=P,switches=S,nodes=N,ranks=R[,order=block|cyclic][,intra_gbps=B,intra_us=L,inter_gbps=B,inter_us=L,nic=M]
//
// S switches per pod, N nodes per switch, R ranks per node; R may be a ':'-separated list with one count
// per node (uneven nodes, e.g. nodes=2,ranks=3:5). Omitted: pods, switches and nodes default to 1 and
// ranks to the communicator size divided evenly. order=cyclic numbers ranks round-robin over the nodes
// (as `mpirun --map-by node` does), so the ranks of a node are not contiguous.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/topology/topology.hpp"

namespace paro::topology {

struct EmulationSpec {
  int pods = 1, switches = 1, nodes = 1;
  std::vector<int> ranks_per_node;  // empty: even split of the communicator; one value: every node; else per node
  bool cyclic = false;
  LinkSpec intra, inter;
  NicModel nic = NicModel::shared;
  std::string text;

  bool paced() const { return intra.known() || inter.known(); }

  int total_nodes() const { return pods * switches * nodes; }

  // The rank count the spec describes, where it gives ranks per node.
  std::optional<int> rank_count() const {
    if (ranks_per_node.empty()) return std::nullopt;
    long long total = 0;
    if (ranks_per_node.size() == 1)
      total = static_cast<long long>(ranks_per_node[0]) * total_nodes();
    else
      for (int c : ranks_per_node) total += c;
    detail::require(total <= (1 << 24), "PARO_EMULATE='", text, "' describes more than 2^24 ranks");
    return static_cast<int>(total);
  }

  static EmulationSpec parse(std::string_view text) {
    EmulationSpec s;
    s.text = std::string(text);
    auto fail = [&](const std::string& why) {
      throw UsageError(detail::concat("PARO_EMULATE='", text, "': ", why,
                                      "; form: pods=P,switches=S,nodes=N,ranks=R[,order=block|cyclic] (R may be a "
                                      "':'-separated list, one count per node) and optional link keys "
                                      "intra_gbps intra_us inter_gbps inter_us nic=shared|per_rank"));
    };
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find(',', start);
      if (end == std::string_view::npos) end = text.size();
      const std::string_view item = text.substr(start, end - start);
      start = end + 1;
      if (item.empty()) continue;
      const std::size_t eq = item.find('=');
      if (eq == std::string_view::npos) fail(detail::concat("'", item, "' is not key=value"));
      const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
      auto count = [&](std::string_view v) {
        try {
          return static_cast<int>(env::parse_integer(v, key, 1, 1 << 16));
        } catch (const Error&) {
          fail(detail::concat(key, "='", v, "' is not a positive integer"));
        }
        return 0;
      };
      if (key == "pods")
        s.pods = count(value);
      else if (key == "switches")
        s.switches = count(value);
      else if (key == "nodes")
        s.nodes = count(value);
      else if (key == "ranks") {
        for (std::size_t p = 0; p <= value.size();) {
          std::size_t q = value.find(':', p);
          if (q == std::string_view::npos) q = value.size();
          s.ranks_per_node.push_back(count(value.substr(p, q - p)));
          p = q + 1;
        }
      } else if (key == "order") {
        if (value == "cyclic")
          s.cyclic = true;
        else if (value != "block")
          fail(detail::concat("order='", value, "' is not one of: block cyclic"));
      } else if (key == "intra_gbps" || key == "intra_us" || key == "inter_gbps" || key == "inter_us") {
        double number = 0;
        try {
          number = env::parse_number(value, key);
        } catch (const Error&) {
          fail(detail::concat(key, "='", value, "' is not a number in [0, 1e9]"));
        }
        // A bandwidth of 0 would silently leave the link unpaced (an unknown bandwidth is a key left out), and
        // one near 0 would overflow the pacing's nanoseconds.
        if (key.substr(6) == "gbps" && number < 1e-3)
          fail(detail::concat(key, "='", value,
                              "': a bandwidth must be at least 0.001 (Gbit/s); leave the key out where unknown"));
        LinkSpec& link = key.substr(0, 5) == "intra" ? s.intra : s.inter;
        (key.substr(6) == "gbps" ? link.gbps : link.latency_us) = number;
      } else if (key == "nic") {
        try {
          s.nic = parse_nic_model(value, "PARO_EMULATE");
        } catch (const Error&) {
          fail(detail::concat("nic='", value, "' is not one of: shared per_rank"));
        }
      } else {
        fail(detail::concat("unknown key '", key, "'; allowed: pods switches nodes ranks order intra_gbps intra_us ",
                            "inter_gbps inter_us nic"));
      }
    }
    if (static_cast<long long>(s.pods) * s.switches * s.nodes > (1 << 20)) fail("more than 2^20 nodes");
    if (s.ranks_per_node.size() > 1 && static_cast<int>(s.ranks_per_node.size()) != s.total_nodes())
      fail(
          detail::concat("ranks lists ", s.ranks_per_node.size(), " counts but there are ", s.total_nodes(), " nodes"));
    return s;
  }

  // Ranks per node for a communicator of n ranks.
  std::vector<int> counts_for(int n) const {
    const int nodes_total = total_nodes();
    std::vector<int> counts(static_cast<std::size_t>(nodes_total));
    if (ranks_per_node.empty()) {
      detail::require(n % nodes_total == 0, "PARO_EMULATE='", text, "': ", n, " ranks do not split evenly over ",
                      nodes_total, " nodes; give ranks=R or a per-node list");
      std::fill(counts.begin(), counts.end(), n / nodes_total);
    } else if (ranks_per_node.size() == 1) {
      std::fill(counts.begin(), counts.end(), ranks_per_node[0]);
    } else {
      counts = ranks_per_node;
    }
    long long total = 0;
    for (int c : counts) total += c;
    detail::require(total == n, "PARO_EMULATE='", text, "' describes ", total, " ranks but the communicator has ", n);
    return counts;
  }

  Topology place(int n) const {
    const std::vector<int> counts = counts_for(n);
    std::vector<int> node_of(static_cast<std::size_t>(n));
    if (!cyclic) {
      int r = 0;
      for (std::size_t k = 0; k < counts.size(); ++k)
        for (int i = 0; i < counts[k]; ++i) node_of[static_cast<std::size_t>(r++)] = static_cast<int>(k);
    } else {
      std::vector<int> left = counts;
      std::size_t k = 0;
      for (int r = 0; r < n; ++r) {
        while (left[k] == 0) k = (k + 1) % left.size();
        node_of[static_cast<std::size_t>(r)] = static_cast<int>(k);
        --left[k];
        k = (k + 1) % left.size();
      }
    }
    Topology t;
    std::vector<int> next_local(counts.size(), 0);
    for (int r = 0; r < n; ++r) {
      const int k = node_of[static_cast<std::size_t>(r)];
      const int sw = k / nodes, pod = sw / switches;
      t.ranks.push_back({detail::concat("pod", pod), detail::concat("sw", sw), detail::concat("n", k),
                         next_local[static_cast<std::size_t>(k)]++, -1});
    }
    for (const char* fact : {"node", "local", "switch", "pod"}) t.sources[fact] = "PARO_EMULATE";
    t.known_levels = {Level::node, Level::switch_, Level::pod};
    if (paced()) {
      t.links[Level::node] = intra;
      t.links[Level::switch_] = t.links[Level::pod] = inter;
      t.nic = nic;
    }
    return t;
  }
};

}  // namespace paro::topology
