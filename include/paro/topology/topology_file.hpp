#pragma once
// PARO_TOPO_FILE: a JSON description of the cluster, the first source of discovery.
//
//   {
//     "hosts": [ {"name": "gpu01", "switch": "leaf1", "pod": "podA"}, ... ],   switch and pod optional
//     "ranks": ["gpu01", "gpu01", "gpu02", ...],    optional: the host of each rank, by rank
//     "links": {"node": {"gbps": 2400, "latency_us": 0.5}, "switch": {...}, "pod": {...}}   optional
//     "nic": "per_rank"                            optional: "shared" (one NIC per node) or "per_rank"
//   }
// Link bandwidths are Gbit/s: per rank for "node" (the links inside a node), per NIC for the levels above.
//
// Without "ranks", a rank's host comes from the next sources (launcher, Slurm, host identity) and must be
// listed in "hosts". Parsing needs nlohmann-json (Debian: nlohmann-json3-dev); errors name the file, the
// line and column, or the field, and the allowed values.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "paro/core/error.hpp"
#include "paro/core/file.hpp"
#include "paro/topology/topology.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#define PARO_HAVE_JSON 1
#endif

namespace paro::topology {

struct HostEntry {
  std::string switch_name;  // empty: not given
  std::string pod;
};

struct TopologyFile {
  std::string path;
  std::size_t content_hash = 0;  // lets ranks check that they read the same file
  std::map<std::string, HostEntry> hosts;
  std::vector<std::string> rank_hosts;  // empty: not given
  std::map<Level, LinkSpec> links;
  std::optional<NicModel> nic;

  bool gives_switch() const {
    for (auto& [name, h] : hosts)
      if (!h.switch_name.empty()) return true;
    return false;
  }
  bool gives_pod() const {
    for (auto& [name, h] : hosts)
      if (!h.pod.empty()) return true;
    return false;
  }

  static TopologyFile parse_text(const std::string& text, const std::string& path) {
#ifdef PARO_HAVE_JSON
    using nlohmann::json;
    auto fail = [&](const std::string& field, const std::string& why) -> void {
      throw UsageError(detail::concat("PARO_TOPO_FILE '", path, "': ", field, ": ", why));
    };
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::parse_error& e) {
      std::size_t line = 1, column = 1;
      for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
        if (text[i] == '\n') {
          ++line;
          column = 1;
        } else {
          ++column;
        }
      }
      throw UsageError(detail::concat("PARO_TOPO_FILE '", path, "': line ", line, ", column ", column,
                                      ": not valid JSON (", e.what(), ")"));
    } catch (const json::exception& e) {  // a number beyond double's range (1e400), invalid UTF-8, ...
      throw UsageError(detail::concat("PARO_TOPO_FILE '", path, "': not readable JSON (", e.what(), ")"));
    }
    TopologyFile f;
    f.path = path;
    f.content_hash = std::hash<std::string>{}(text);
    if (!doc.is_object())
      fail("top level", "expected an object with \"hosts\" (and optional \"ranks\", \"links\", \"nic\")");
    for (auto& [key, value] : doc.items())
      if (key != "hosts" && key != "ranks" && key != "links" && key != "nic")
        fail(key, "unknown field; allowed: hosts ranks links nic");
    if (!doc.contains("hosts") || !doc["hosts"].is_array() || doc["hosts"].empty())
      fail("hosts", "expected a non-empty array of {\"name\", \"switch\", \"pod\"}");
    const json& hosts = doc["hosts"];
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const json& h = hosts[i];
      const std::string where = detail::concat("hosts[", i, "]");
      if (!h.is_object()) fail(where, "expected an object");
      for (auto& [key, value] : h.items())
        if (key != "name" && key != "switch" && key != "pod")
          fail(where + "." + key, "unknown field; allowed: name switch pod");
      for (const char* key : {"name", "switch", "pod"})
        if (h.contains(key) && !h[key].is_string()) fail(where + "." + key, "expected a string");
      if (!h.contains("name") || h["name"].get<std::string>().empty()) fail(where + ".name", "missing host name");
      const std::string name = h["name"].get<std::string>();
      HostEntry e{h.value("switch", std::string()), h.value("pod", std::string())};
      if (!f.hosts.emplace(name, e).second) fail(where + ".name", "host '" + name + "' is listed twice");
    }
    if (doc.contains("ranks")) {
      const json& ranks = doc["ranks"];
      if (!ranks.is_array()) fail("ranks", "expected an array of host names, one per rank");
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (!ranks[i].is_string()) fail(detail::concat("ranks[", i, "]"), "expected a host name");
        const std::string host = ranks[i].get<std::string>();
        if (!f.hosts.count(host)) fail(detail::concat("ranks[", i, "]"), "host '" + host + "' is not in \"hosts\"");
        f.rank_hosts.push_back(host);
      }
    }
    if (doc.contains("nic")) {
      if (!doc["nic"].is_string()) fail("nic", "expected \"shared\" or \"per_rank\"");
      try {
        f.nic = parse_nic_model(doc["nic"].get<std::string>(), "nic");
      } catch (const Error& e) {
        fail("nic", e.message());
      }
    }
    if (doc.contains("links")) {
      const json& links = doc["links"];
      if (!links.is_object()) fail("links", "expected an object keyed by level");
      for (auto& [key, value] : links.items()) {
        std::optional<Level> level;
        for (Level l : all_levels)
          if (key == name_of(l)) level = l;
        if (!level) fail("links." + key, "unknown level; allowed: node switch pod");
        if (!value.is_object()) fail("links." + key, "expected {\"gbps\": .., \"latency_us\": ..}");
        LinkSpec spec;
        for (auto& [field, number] : value.items()) {
          const std::string where = "links." + key + "." + field;
          if (field != "gbps" && field != "latency_us") fail(where, "unknown field; allowed: gbps latency_us");
          const double v = number.is_number() ? number.get<double>() : -1;
          // An unknown link is a missing field (the cost model then says which preset it uses), never a 0.
          if (field == "gbps" && !(v >= 1e-3 && v <= 1e9))
            fail(where, "expected Gbit/s in [0.001, 1e9]; leave the field out where the bandwidth is unknown");
          if (field == "latency_us" && !(v >= 0 && v <= 1e9)) fail(where, "expected microseconds in [0, 1e9]");
          (field == "gbps" ? spec.gbps : spec.latency_us) = v;
        }
        f.links[*level] = spec;
      }
    }
    return f;
#else
    (void)text;
    throw UsageError(detail::concat("PARO_TOPO_FILE '", path,
                                    "': reading topology files needs nlohmann-json (Debian: nlohmann-json3-dev)"));
#endif
  }

  static TopologyFile load(const std::string& path) {
    const std::optional<std::string> text = detail::read_file(path);
    detail::require(text.has_value(), "PARO_TOPO_FILE '", path, "': cannot open the file");
    return parse_text(*text, path);
  }
};

}  // namespace paro::topology
