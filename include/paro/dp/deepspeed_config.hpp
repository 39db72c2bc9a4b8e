#pragma once
// The keys of a DeepSpeed JSON config that a PaRO-DP trainer takes; the others are ignored, as DeepSpeed
// configs carry many (fp16, logging, ...).
//
//   zero_optimization.paro_strategy   a strategy (dp/strategy.hpp), e.g. "NIG"
//   zero_optimization.stage           0..3: NNN, NNG, NGG, GGG (must agree with paro_strategy when both are given)
//   gradient_accumulation_steps       1..2^20
//   train_micro_batch_size_per_gpu    1..2^20
//   optimizer.type                    Adam or AdamW (the engine runs Adam)
//   optimizer.params.lr               a finite number in (0, 1e3]
//
// Errors name the file and the field and say what is allowed; a number out of range (0, negative, huge,
// a fraction where a count is meant) is an error, never clamped. Needs nlohmann-json.

#include <optional>
#include <string>

#include "paro/core/error.hpp"
#include "paro/core/file.hpp"
#include "paro/dp/strategy.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#define PARO_HAVE_DEEPSPEED_JSON 1
#endif

namespace paro::dp {

struct DeepSpeedConfig {
  std::optional<Strategy> strategy;
  std::optional<int> accumulation, micro_batch;
  std::optional<float> lr;

  static DeepSpeedConfig parse(const std::string& text, const std::string& path) {
#ifdef PARO_HAVE_DEEPSPEED_JSON
    using nlohmann::json;
    auto fail = [&](const std::string& field, const std::string& why) {
      throw UsageError(detail::concat("config '", path, "': ", field, ": ", why));
    };
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::exception& e) {  // syntax, numbers beyond double's range (1e400), invalid UTF-8
      fail("syntax", e.what());
    }
    if (!doc.is_object()) fail("top level", "expected an object of DeepSpeed settings");
    auto object = [&](const json& parent, const char* key, const std::string& field) -> const json* {
      if (!parent.contains(key)) return nullptr;
      if (!parent[key].is_object()) fail(field, "expected an object");
      return &parent[key];
    };
    // Checked as an integer before any conversion: 1e20 or 2.5 must not become an int.
    auto integer = [&](const json& parent, const char* key, const std::string& field, long long lo,
                       long long hi) -> std::optional<int> {
      if (!parent.contains(key)) return std::nullopt;
      const json& v = parent[key];
      long long x = lo - 1;
      if (v.is_number_unsigned())
        x = v.get<unsigned long long>() > static_cast<unsigned long long>(hi) ? hi + 1 : v.get<long long>();
      else if (v.is_number_integer())
        x = v.get<long long>();
      if (x < lo || x > hi) fail(field, detail::concat("expected an integer in [", lo, ", ", hi, "], got ", v.dump()));
      return static_cast<int>(x);
    };
    DeepSpeedConfig c;
    if (const json* z = object(doc, "zero_optimization", "zero_optimization")) {
      if (z->contains("paro_strategy")) {
        if (!(*z)["paro_strategy"].is_string())
          fail("zero_optimization.paro_strategy", "expected a string such as \"NIG\"");
        try {
          c.strategy = Strategy::parse((*z)["paro_strategy"].get<std::string>());
        } catch (const Error& e) {
          fail("zero_optimization.paro_strategy", e.message());
        }
      }
      if (const std::optional<int> stage = integer(*z, "stage", "zero_optimization.stage", 0, 3)) {
        const Strategy staged = zero_stage(*stage);
        if (c.strategy && *c.strategy != staged)
          fail("zero_optimization", detail::concat("paro_strategy ", c.strategy->name(), " and stage ", *stage, " (",
                                                   staged.name(), ") disagree; give one"));
        c.strategy = staged;
      }
    }
    c.accumulation = integer(doc, "gradient_accumulation_steps", "gradient_accumulation_steps", 1, 1 << 20);
    c.micro_batch = integer(doc, "train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu", 1, 1 << 20);
    if (const json* o = object(doc, "optimizer", "optimizer")) {
      if (o->contains("type")) {
        const json& t = (*o)["type"];
        if (!t.is_string() || (t != "Adam" && t != "AdamW" && t != "adam" && t != "adamw"))
          fail("optimizer.type", detail::concat(t.dump(), ": this engine runs Adam; allowed: Adam AdamW"));
      }
      if (const json* p = object(*o, "params", "optimizer.params"); p && p->contains("lr")) {
        const json& lr = (*p)["lr"];
        const double v = lr.is_number() ? lr.get<double>() : -1;
        // 1e-50 is positive but would become 0.0f.
        if (!(v > 0 && v <= 1e3 && static_cast<float>(v) > 0))
          fail("optimizer.params.lr", detail::concat("expected a number in (0, 1e3], got ", lr.dump()));
        c.lr = static_cast<float>(v);
      }
    }
    return c;
#else
    (void)text;
    throw UsageError(detail::concat("config '", path, "': reading it needs nlohmann-json (nlohmann-json3-dev)"));
#endif
  }

  static DeepSpeedConfig read(const std::string& path) {
    const std::optional<std::string> text = detail::read_file(path);
    detail::require(text.has_value(), "config '", path, "': cannot read it");
    return parse(*text, path);
  }
};

}  // namespace paro::dp
