#pragma once
// Topology discovery. Each rank collects what it can see locally (LocalFacts), the ranks exchange them,
// and every rank resolves the same Topology from the same facts, so errors are identical everywhere.
//
// Precedence, first source that describes a fact wins (docs/topology.md):
//   1. PARO_EMULATE                       everything (a tree for ranks on one machine)
//   2. PARO_TOPO_FILE                     rank -> host ("ranks"), host -> switch and pod ("hosts"), links
//   3. SLURM_TOPOLOGY_ADDR (+ _PATTERN)   node, leaf switch, the switch above it as pod
//   4. launcher variables                 node id (SLURM_NODEID, GROUP_RANK) and local index (SLURM_LOCALID,
//                                         LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MV2_COMM_WORLD_LOCAL_RANK,
//                                         MPI_LOCALRANKID, FLUX_TASK_LOCAL_ID)
//   5. MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) on the mpi backend
//   6. host identity: hostname + boot id, exchanged across ranks (as NCCL does)
// A source set on some ranks but not others, two ranks of one node on different hosts, or local indices
// that are not 0..k-1 on a node are contradictions and errors that name the source.

#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "paro/core/env.hpp"
#include "paro/core/error.hpp"
#include "paro/core/log.hpp"
#include "paro/topology/emulation.hpp"
#include "paro/topology/topology.hpp"
#include "paro/topology/topology_file.hpp"
#include "paro/transport/control.hpp"

namespace paro::topology {

using EnvLookup = std::function<std::optional<std::string>(const char*)>;

// A launcher's pair of variables: the rank's index on its node and the node's rank count (optional).
struct LocalVariables {
  const char* local;
  const char* size;
};
// Earlier entries are preferred; an entry whose values contradict the nodes is skipped with a warning
// (e.g. SLURM_LOCALID is 0 for every rank that mpirun starts inside one Slurm step).
inline constexpr LocalVariables launcher_locals[] = {
    {"SLURM_LOCALID", nullptr},
    {"LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"},
    {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"FLUX_TASK_LOCAL_ID", nullptr},
};
inline constexpr const char* launcher_nodes[] = {"SLURM_NODEID", "GROUP_RANK"};

struct LocalFacts {
  std::map<std::string, std::string> values;  // variable or fact name -> value, as this rank saw it

  std::optional<std::string> get(const std::string& key) const {
    auto it = values.find(key);
    if (it == values.end()) return std::nullopt;
    return it->second;
  }

  std::string serialize() const {
    std::string out;
    for (auto& [k, v] : values) {
      detail::require(k.find_first_of("=\n") == std::string::npos && v.find('\n') == std::string::npos,
                      "topology discovery: value of ", k, " contains a newline");
      out += k + "=" + v + "\n";
    }
    return out;
  }

  static LocalFacts deserialize(const std::string& text) {
    LocalFacts f;
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      const std::size_t eq = line.find('=');
      if (eq != std::string::npos) f.values[line.substr(0, eq)] = line.substr(eq + 1);
      start = end + 1;
    }
    return f;
  }
};

inline std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

inline std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// What this rank can see without talking to the others.
inline LocalFacts collect_local_facts(const EnvLookup& env) {
  LocalFacts f;
  f.values["host"] = host_name();
  f.values["boot"] = boot_id();
  for (const auto& lv : launcher_locals) {
    if (auto v = env(lv.local)) f.values[lv.local] = *v;
    if (lv.size)
      if (auto v = env(lv.size)) f.values[lv.size] = *v;
  }
  for (const char* var : launcher_nodes)
    if (auto v = env(var)) f.values[var] = *v;
  for (const char* var : {"SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN"})
    if (auto v = env(var)) f.values[var] = *v;
  return f;
}

namespace detail_discovery {

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// The value of key on every rank, or nullopt when no rank has it; an error when only some have it.
inline std::optional<std::vector<std::string>> everywhere(const std::vector<LocalFacts>& facts,
                                                          const std::string& key) {
  std::vector<std::string> values;
  std::vector<int> missing;
  for (std::size_t r = 0; r < facts.size(); ++r) {
    auto v = facts[r].get(key);
    if (v)
      values.push_back(*v);
    else
      missing.push_back(static_cast<int>(r));
  }
  if (values.empty()) return std::nullopt;
  detail::require(missing.empty(), "topology: contradictory sources: ", key, " is set on ", values.size(),
                  " rank(s) but not on rank ", missing.empty() ? -1 : missing[0],
                  "; set it for every rank or for none");
  return values;
}

inline int parse_index(const std::string& value, const std::string& var, std::size_t rank) {
  try {
    return static_cast<int>(env::parse_integer(value, var, 0, 1 << 24));
  } catch (const Error&) {
    throw UsageError(
        detail::concat("topology: ", var, "='", value, "' on rank ", rank, " is not a non-negative integer"));
  }
}

// Names the ranks' nodes; returns (node name per rank, source).
inline std::pair<std::vector<std::string>, std::string> resolve_nodes(const std::vector<LocalFacts>& facts,
                                                                      const TopologyFile* file) {
  const std::size_t n = facts.size();
  std::vector<std::string> host(n);
  for (std::size_t r = 0; r < n; ++r)
    host[r] = facts[r].get("host").value_or("?") + "#" + facts[r].get("boot").value_or("");
  auto plain_host = [&](std::size_t r) { return facts[r].get("host").value_or("?"); };

  if (file && !file->rank_hosts.empty()) {
    detail::require(file->rank_hosts.size() == n, "PARO_TOPO_FILE '", file->path, "': \"ranks\" lists ",
                    file->rank_hosts.size(), " ranks but the communicator has ", n);
    return {file->rank_hosts, "PARO_TOPO_FILE (ranks)"};
  }
  // Ranks grouped into nodes by some key (one host each); a node is named by the hostname of its first
  // rank, with "#<ordinal>" where an earlier node already took that name.
  auto name_by_key = [&](const std::vector<std::string>& key, const std::string& source) {
    std::map<std::string, std::string> name_of_key, host_of_key;
    std::set<std::string> used;
    std::vector<std::string> names(n);
    for (std::size_t r = 0; r < n; ++r) {
      auto [it, fresh] = host_of_key.emplace(key[r], host[r]);
      detail::require(fresh || it->second == host[r], "topology: contradictory sources: ", source,
                      " puts two ranks on node '", key[r], "' but they run on different hosts ('", plain_host(r),
                      "' and another); fix the launcher variables or set PARO_TOPO_FILE");
      auto kt = name_of_key.find(key[r]);
      if (kt == name_of_key.end()) {
        std::string name = plain_host(r);
        if (!used.insert(name).second) name += "#" + std::to_string(name_of_key.size());
        kt = name_of_key.emplace(key[r], name).first;
      }
      names[r] = kt->second;
    }
    return names;
  };
  if (auto addr = everywhere(facts, "SLURM_TOPOLOGY_ADDR")) {
    std::vector<std::string> names(n);
    for (std::size_t r = 0; r < n; ++r) names[r] = split((*addr)[r], '.').back();
    name_by_key(names, "SLURM_TOPOLOGY_ADDR");  // only the consistency check: Slurm's node names are host names
    return {names, "SLURM_TOPOLOGY_ADDR"};
  }
  for (const char* var : launcher_nodes)
    if (auto ids = everywhere(facts, var)) return {name_by_key(*ids, var), var};
  if (auto shared = everywhere(facts, "mpi_shared_id"))
    return {name_by_key(*shared, "MPI_COMM_TYPE_SHARED"), "MPI_COMM_TYPE_SHARED"};
  return {name_by_key(host, "hostname + boot id"), "hostname + boot id"};
}

// Local index per rank: the rank's position on its node, ordered by the first launcher variable that is
// consistent (distinct values on every node, below the node-size variable), else by rank. Launcher
// variables describe MPI_COMM_WORLD, so on a sub-communicator a node may hold only some of the values.
inline std::pair<std::vector<int>, std::string> resolve_locals(const std::vector<LocalFacts>& facts,
                                                               const std::vector<std::string>& node, int rank_for_log) {
  const std::size_t n = facts.size();
  std::map<std::string, int> node_size;
  for (auto& name : node) ++node_size[name];
  auto positions = [&](const std::vector<int>& order_key) {
    std::map<std::string, std::vector<std::pair<int, std::size_t>>> by_node;
    for (std::size_t r = 0; r < n; ++r) by_node[node[r]].push_back({order_key[r], r});
    std::vector<int> local(n);
    for (auto& [name, list] : by_node) {
      std::sort(list.begin(), list.end());
      for (std::size_t i = 0; i < list.size(); ++i) local[list[i].second] = static_cast<int>(i);
    }
    return local;
  };
  std::string first_problem;
  for (const auto& lv : launcher_locals) {
    auto values = everywhere(facts, lv.local);
    if (!values) continue;
    std::vector<int> key(n);
    std::map<std::string, std::map<int, std::size_t>> seen;
    std::string problem;
    for (std::size_t r = 0; r < n && problem.empty(); ++r) {
      key[r] = parse_index((*values)[r], lv.local, r);
      auto [it, fresh] = seen[node[r]].emplace(key[r], r);
      if (!fresh)
        problem = detail::concat(lv.local, " gives ranks ", it->second, " and ", r, " the same local index ", key[r],
                                 " on node '", node[r], "'");
      if (problem.empty() && lv.size)
        if (auto size = facts[r].get(lv.size)) {
          const int k = parse_index(*size, lv.size, r);
          if (key[r] >= k || node_size[node[r]] > k)
            problem = detail::concat(lv.size, "=", k, " on rank ", r, " but its ", lv.local, " is ", key[r],
                                     " and node '", node[r], "' has ", node_size[node[r]], " ranks");
        }
    }
    if (problem.empty()) {
      if (!first_problem.empty()) log::warn(rank_for_log, "topology: ignoring ", first_problem, "; using ", lv.local);
      return {positions(key), lv.local};
    }
    if (first_problem.empty()) first_problem = problem;
  }
  detail::require(first_problem.empty(), "topology: contradictory sources: ", first_problem);
  std::vector<int> by_rank(n);
  for (std::size_t r = 0; r < n; ++r) by_rank[r] = static_cast<int>(r);
  return {positions(by_rank), "rank order within the node"};
}

}  // namespace detail_discovery

// The Topology all ranks agree on, from every rank's facts. Pure: no communication.
inline Topology resolve(const std::vector<LocalFacts>& facts, const TopologyFile* file, int rank_for_log = 0) {
  using namespace detail_discovery;
  const std::size_t n = facts.size();
  Topology t;
  auto [node, node_source] = resolve_nodes(facts, file);
  auto [local, local_source] = resolve_locals(facts, node, rank_for_log);
  t.sources["node"] = node_source;
  t.sources["local"] = local_source;
  t.ranks.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    t.ranks[r].node = node[r];
    t.ranks[r].local = local[r];
    t.ranks[r].switch_name = "switch0";
    t.ranks[r].pod = "pod0";
  }
  t.sources["switch"] = t.sources["pod"] = "none (one for all)";

  if (file && (file->gives_switch() || file->gives_pod())) {
    for (std::size_t r = 0; r < n; ++r) {
      auto it = file->hosts.find(node[r]);
      detail::require(it != file->hosts.end(), "PARO_TOPO_FILE '", file->path, "': host '", node[r], "' (rank ", r,
                      ", node from ", node_source, ") is not listed in \"hosts\"");
      if (file->gives_switch())
        t.ranks[r].switch_name = it->second.switch_name.empty() ? "switch0" : it->second.switch_name;
      if (file->gives_pod()) t.ranks[r].pod = it->second.pod.empty() ? "pod0" : it->second.pod;
    }
    if (file->gives_switch()) {
      t.sources["switch"] = "PARO_TOPO_FILE";
      t.known_levels.push_back(Level::switch_);
    }
    if (file->gives_pod()) {
      t.sources["pod"] = "PARO_TOPO_FILE";
      t.known_levels.push_back(Level::pod);
    }
  } else if (auto addr = everywhere(facts, "SLURM_TOPOLOGY_ADDR")) {
    auto patterns = everywhere(facts, "SLURM_TOPOLOGY_ADDR_PATTERN");
    detail::require(patterns.has_value(),
                    "topology: SLURM_TOPOLOGY_ADDR is set but SLURM_TOPOLOGY_ADDR_PATTERN is not");
    bool has_pod = false;
    for (std::size_t r = 0; r < n; ++r) {
      const auto parts = split((*addr)[r], '.'), kinds = split((*patterns)[r], '.');
      detail::require(parts.size() == kinds.size() && kinds.back() == "node", "topology: SLURM_TOPOLOGY_ADDR='",
                      (*addr)[r], "' on rank ", r, " does not match SLURM_TOPOLOGY_ADDR_PATTERN='", (*patterns)[r],
                      "' (expected as many '.'-separated parts, the last one 'node')");
      std::vector<std::string> switches;
      for (std::size_t i = 0; i + 1 < parts.size(); ++i)
        if (kinds[i] == "switch") switches.push_back(parts[i]);
      if (!switches.empty()) t.ranks[r].switch_name = switches.back();
      if (switches.size() >= 2) {
        t.ranks[r].pod = switches[switches.size() - 2];
        has_pod = true;
      }
    }
    t.sources["switch"] = "SLURM_TOPOLOGY_ADDR";
    t.known_levels.push_back(Level::switch_);
    if (has_pod) {
      t.sources["pod"] = "SLURM_TOPOLOGY_ADDR (the switch above the leaf)";
      t.known_levels.push_back(Level::pod);
    }
  }
  if (file) {
    t.links = file->links;
    t.nic = file->nic;
  }
  t.validate();
  return t;
}

struct DiscoveryOptions {
  std::optional<std::string> emulate;    // PARO_EMULATE
  std::optional<std::string> topo_file;  // PARO_TOPO_FILE
  EnvLookup env = [](const char* name) { return env::get(name); };

  static DiscoveryOptions from_env() {
    DiscoveryOptions o;
    o.emulate = env::get("PARO_EMULATE");
    o.topo_file = env::get("PARO_TOPO_FILE");
    return o;
  }
};

namespace detail_discovery {
template <class T, class = void>
struct has_shared_memory_id : std::false_type {};
template <class T>
struct has_shared_memory_id<T, std::void_t<decltype(std::declval<T&>().shared_memory_id())>> : std::true_type {};

constexpr std::size_t record_bytes = 4096;
}  // namespace detail_discovery

// Collective over t: every rank must call it. Returns the same Topology on every rank, or throws the same
// error on every rank: nothing that can fail on one rank alone (a missing file, a different PARO_EMULATE)
// is acted on before the exchange, so no rank is left waiting for the others.
template <class Transport>
Topology discover(Transport& t, const DiscoveryOptions& options = DiscoveryOptions::from_env()) {
  detail::require(t.size() > 0, "topology discovery: the communicator is empty");
  LocalFacts mine = collect_local_facts(options.env);
  std::optional<TopologyFile> file;
  mine.values["paro_emulate"] = options.emulate.value_or("");
  mine.values["paro_topo_file"] = options.topo_file.value_or("");
  if (options.topo_file) {
    try {
      file = TopologyFile::load(*options.topo_file);
      mine.values["paro_topo_file_hash"] = std::to_string(file->content_hash);
    } catch (const Error& e) {
      mine.values["paro_local_error"] = e.message();
    }
  }
  if constexpr (detail_discovery::has_shared_memory_id<Transport>::value)
    mine.values["mpi_shared_id"] = std::to_string(t.shared_memory_id());
  std::string text = mine.serialize();
  const std::size_t block = detail_discovery::record_bytes;
  if (text.size() >= block)
    text = detail::concat("paro_local_error=topology discovery: this rank's facts take ", text.size(),
                          " bytes; at most ", block - 1, " fit\n");
  std::vector<char> all(block * static_cast<std::size_t>(t.size()), '\0');
  std::copy(text.begin(), text.end(),
            all.begin() + static_cast<std::ptrdiff_t>(block * static_cast<std::size_t>(t.rank())));
  control::bruck_all_gather_host(t, all.data(), block, DataType::u8);
  std::vector<LocalFacts> facts;
  for (int r = 0; r < t.size(); ++r)
    facts.push_back(LocalFacts::deserialize(std::string(all.data() + block * static_cast<std::size_t>(r))));

  for (std::size_t r = 0; r < facts.size(); ++r)
    if (auto error = facts[r].get("paro_local_error")) throw UsageError(detail::concat(*error, " (on rank ", r, ")"));
  for (const char* key : {"paro_emulate", "paro_topo_file", "paro_topo_file_hash"})
    for (std::size_t r = 1; r < facts.size(); ++r)
      detail::require(facts[r].get(key) == facts[0].get(key), "topology: ranks disagree on ",
                      std::string(key) == "paro_emulate" ? "PARO_EMULATE" : "PARO_TOPO_FILE",
                      std::string(key) == "paro_topo_file_hash" ? "'s content" : "", ": rank 0 has '",
                      facts[0].get(key).value_or(""), "', rank ", r, " has '", facts[r].get(key).value_or(""),
                      "'; give every rank the same");
  if (options.emulate) {
    Topology topo = EmulationSpec::parse(*options.emulate).place(t.size());
    if (file && topo.links.empty()) {  // PARO_EMULATE's link keys win
      topo.links = file->links;
      topo.nic = file->nic;
    }
    return topo;
  }
  return resolve(facts, file ? &*file : nullptr, t.rank());
}

}  // namespace paro::topology
