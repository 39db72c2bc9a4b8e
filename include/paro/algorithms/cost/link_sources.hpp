#pragma once
// Where the cost model's numbers come from, first found (the Communicator passes PARO_COST_FILE and
// PARO_LINKS from its Tuning):
//   1. PARO_COST_FILE: a JSON file written by `paro-bench --calibrate` (measured on this machine/backend)
//   2. the links of the topology (PARO_EMULATE's link keys, or a topology file's "links" and "nic"),
//      over PARO_LINKS's preset (or the default) for whatever they leave out
//   3. PARO_LINKS=<preset> (cost_model.hpp: presets())
//   4. the default preset
// The automatic algorithm is the fastest the model predicts (AlgorithmList::best, registry.hpp).
//
//   {"intra": {"gbps": 20, "latency_us": 1}, "inter": {"gbps": 2, "latency_us": 10}, "nic": "shared",
//    "step_us": 12, "lane_us": 40, "reduce_gbps": 30, "copy_gbps": 60, "model_error": 0.05,
//    "corrections": {"all_reduce": {"ring": [[4096, 1.6], [1048576, 1.1]], ...}, ...}}      (a cost file)
// A correction of paro_cc with its lanes inline is named "paro_cc/inline" (LinkModel::CorrectionKey).

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "paro/algorithms/cost/cost_model.hpp"
#include "paro/algorithms/registry.hpp"
#include "paro/core/file.hpp"
#include "paro/topology/topology.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#define PARO_HAVE_COST_JSON 1
#endif

namespace paro::algorithms {

// In a cost file, what follows an algorithm's name in the correction of its inline lanes.
inline constexpr const char* inline_suffix = "/inline";

// The JSON form of a link model (a cost file); needs nlohmann-json.
inline std::string to_json(const LinkModel& m) {
  std::string corrections;
  for (Collective c : all_collectives) {
    std::string per_algo;
    for (const auto& [key, k] : m.corrections)
      if (key.collective == c) {
        std::string points;
        for (auto [bytes, ratio] : k)
          points += detail::concat(points.empty() ? "" : ", ", "[", static_cast<long long>(bytes), ", ", ratio, "]");
        per_algo += detail::concat(per_algo.empty() ? "" : ", ", "\"", name_of(key.algorithm),
                                   key.lanes_inline ? inline_suffix : "", "\": [", points, "]");
      }
    if (!per_algo.empty())
      corrections += detail::concat(corrections.empty() ? "" : ", ", "\"", name_of(c), "\": {", per_algo, "}");
  }
  return detail::concat("{\"intra\": {\"gbps\": ", m.intra.gbps, ", \"latency_us\": ", m.intra.latency_us,
                        "}, \"inter\": {\"gbps\": ", m.inter.gbps, ", \"latency_us\": ", m.inter.latency_us,
                        "}, \"nic\": \"", name_of(m.nic), "\", \"step_us\": ", m.step_us, ", \"lane_us\": ", m.lane_us,
                        ", \"reduce_gbps\": ", m.reduce_gbps, ", \"copy_gbps\": ", m.copy_gbps,
                        ", \"model_error\": ", m.model_error, ", \"corrections\": {", corrections, "}}");
}

inline LinkModel parse_cost_file(const std::string& text, const std::string& path) {
#ifdef PARO_HAVE_COST_JSON
  using nlohmann::json;
  auto fail = [&](const std::string& field, const std::string& why) {
    throw UsageError(detail::concat("PARO_COST_FILE '", path, "': ", field, ": ", why));
  };
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // syntax, and numbers beyond double's range (1e400)
    fail("syntax", e.what());
  }
  if (!doc.is_object()) fail("top level", "expected an object (as written by paro-bench --calibrate)");
  LinkModel m;
  auto number = [&](const json& obj, const char* key, const std::string& where, double& out) {
    if (!obj.contains(key)) return;
    if (!obj[key].is_number() || !(obj[key].get<double>() >= 0 && obj[key].get<double>() <= 1e9))
      fail(where + key, "expected a number in [0, 1e9]");
    out = obj[key].get<double>();
  };
  for (auto& [key, value] : doc.items()) {
    if (key == "intra" || key == "inter") {
      if (!value.is_object()) fail(key, "expected {\"gbps\": .., \"latency_us\": ..}");
      LinkSpec& link = key == "intra" ? m.intra : m.inter;
      for (auto& [field, v] : value.items())
        if (field != "gbps" && field != "latency_us")
          fail(key + "." + field, "unknown field; allowed: gbps latency_us");
      number(value, "gbps", key + ".", link.gbps);
      number(value, "latency_us", key + ".", link.latency_us);
    } else if (key == "nic") {
      if (!value.is_string()) fail("nic", "expected \"shared\" or \"per_rank\"");
      try {
        m.nic = parse_nic_model(value.get<std::string>(), "nic");
      } catch (const Error& e) {
        fail("nic", e.message());
      }
    } else if (key == "corrections") {
      const char* form = "expected {collective: {algorithm: [[bytes, measured/formula], ...]}}";
      if (!value.is_object()) fail("corrections", form);
      for (auto& [coll, algos] : value.items()) {
        Collective c{};
        try {
          c = parse_collective(coll);
        } catch (const Error& e) {
          fail("corrections." + coll, e.message());
        }
        if (!algos.is_object()) fail("corrections." + coll, form);
        for (auto& [algo, points] : algos.items()) {
          const std::string where = "corrections." + coll + "." + algo;
          const std::size_t slash = algo.find('/');
          const bool lanes_inline = slash != std::string::npos;
          Algorithm a{};
          try {
            a = BuiltinAlgorithms::parse(algo.substr(0, slash));
          } catch (const Error& e) {
            fail(where, e.message());
          }
          if (lanes_inline && (a != Algorithm::paro_cc || algo.substr(slash) != inline_suffix))
            fail(where,
                 detail::concat("only paro_cc's lanes run inline: the one name with a '/' is paro_cc", inline_suffix));
          if (!points.is_array()) fail(where, form);
          LinkModel::Correction k;
          for (const json& point : points) {
            if (!point.is_array() || point.size() != 2 || !point[0].is_number() || !point[1].is_number() ||
                !(point[0].get<double>() >= 1 && point[0].get<double>() <= 0x1p50) ||
                std::floor(point[0].get<double>()) != point[0].get<double>() ||
                !(point[1].get<double>() >= 1e-3 && point[1].get<double>() <= 1e3))
              fail(where,
                   detail::concat("every point must be [bytes, ratio] with whole bytes in [1, 2^50] and ratio in ",
                                  "[1e-3, 1e3]; got ", point.dump()));
            k.emplace_back(point[0].get<double>(), point[1].get<double>());
          }
          std::sort(k.begin(), k.end());
          for (std::size_t i = 1; i < k.size(); ++i)  // interpolation divides by the log of their ratio
            if (k[i].first == k[i - 1].first)
              fail(where, detail::concat("two points at ", k[i].first, " bytes; give each size once"));
          m.corrections[{c, a, lanes_inline}] = k;
        }
      }
    } else if (key == "model_error") {
      if (!value.is_number() || !(value.get<double>() >= 0 && value.get<double>() <= 1))
        fail(key, "expected a fraction in [0, 1] (how far predictions may be off)");
      m.model_error = value.get<double>();
    } else if (key == "step_us" || key == "lane_us" || key == "reduce_gbps" || key == "copy_gbps") {
      number(doc, key.c_str(), "",
             key == "step_us"       ? m.step_us
             : key == "lane_us"     ? m.lane_us
             : key == "reduce_gbps" ? m.reduce_gbps
                                    : m.copy_gbps);
    } else {
      fail(key,
           "unknown field; allowed: intra inter nic step_us lane_us reduce_gbps copy_gbps model_error corrections");
    }
  }
  if (m.intra.gbps <= 0 || m.inter.gbps <= 0 || m.reduce_gbps <= 0 || m.copy_gbps <= 0)
    fail("bandwidths", "intra.gbps, inter.gbps, reduce_gbps and copy_gbps must be positive");
  m.source = detail::concat("PARO_COST_FILE ", path);
  return m;
#else
  (void)text;
  throw UsageError(detail::concat("PARO_COST_FILE '", path,
                                  "': reading cost files needs nlohmann-json (Debian: nlohmann-json3-dev)"));
#endif
}

// Without a cost file: the links as the topology and presets describe them, which is also what the lower
// bound of the topology is computed on (a calibration measures what software adds on top).
inline LinkModel link_model_for(const Topology& topo, const std::optional<std::string>& cost_file = std::nullopt,
                                const std::optional<std::string>& preset_name = std::nullopt) {
  if (const auto& path = cost_file) {
    const std::optional<std::string> text = detail::read_file(*path);
    detail::require(text.has_value(), "PARO_COST_FILE '", *path, "': cannot open the file");
    return parse_cost_file(*text, *path);
  }
  LinkModel m;
  if (preset_name) m = preset(*preset_name);
  bool from_topology = false;
  auto node = topo.links.find(Level::node);
  if (node != topo.links.end() && node->second.known()) {
    if (node->second.gbps > 0) m.intra.gbps = node->second.gbps;
    m.intra.latency_us = node->second.latency_us;
    from_topology = true;
  }
  // Between nodes, the NIC's link (the switch level's); the pod uplink's only for messages that cross pods
  // (CostModel::hop), or for all where the topology gives no other.
  for (Level l : {Level::pod, Level::switch_}) {
    auto it = topo.links.find(l);
    if (it == topo.links.end() || !it->second.known()) continue;
    const LinkSpec& link = it->second;
    (l == Level::switch_ ? m.nic_link : m.pod_link) = link;
    if (link.gbps > 0) m.inter.gbps = link.gbps;
    m.inter.latency_us = link.latency_us;
    from_topology = true;
  }
  if (topo.nic) m.nic = *topo.nic;
  if (from_topology) m.source = detail::concat("topology links over ", m.source);
  return m;
}

}  // namespace paro::algorithms
