// The goals of an `ebb bench ...` command, one helper for every benchmark.
//
// A goal is a named check of a measured figure against a limit. In the JSON each goal is an object
//   {"value": <measured value, or null>, "limit": <the limit>, "op": "<=" | ">=" | "<" | ">" | "==",
//    "met": true | false | null, "unit": "...", "note": "..."}
// where `met` is null exactly when nothing was measured (then `value` is null too and `note`
// says why). A goal over several places (a model at a level, ...) has an object of values, one
// per place, and is met when every one is; with no place measured it is unmeasured.
//
// Exit code: a benchmark that prints its goals through Finish() exits 1 when any goal it asked
// for could not be measured (the goal's name and note on stderr), and 0 otherwise, met or not:
// a missed goal is a result, an unmeasured one is a failure of the benchmark.
//
// Not thread-safe; one Goals per benchmark run.
#pragma once

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "common.h"

namespace ebb::cli {

class Goals {
 public:
  // `value` <op> `limit`; std::nullopt (or a NaN/inf value) = not measured, `note` saying why.
  void AtMost(const std::string& name, std::optional<double> value, double limit, const std::string& unit = "",
              const std::string& note = "") {
    Compare(name, value, limit, "<=", unit, note);
  }
  void AtLeast(const std::string& name, std::optional<double> value, double limit, const std::string& unit = "",
               const std::string& note = "") {
    Compare(name, value, limit, ">=", unit, note);
  }
  void Below(const std::string& name, std::optional<double> value, double limit, const std::string& unit = "",
             const std::string& note = "") {
    Compare(name, value, limit, "<", unit, note);
  }
  void Above(const std::string& name, std::optional<double> value, double limit, const std::string& unit = "",
             const std::string& note = "") {
    Compare(name, value, limit, ">", unit, note);
  }
  // A yes/no goal: `holds` is whether the property was observed; nullopt = not measured.
  void Holds(const std::string& name, std::optional<bool> holds, const std::string& note = "") {
    nlohmann::json g = {{"limit", true}, {"op", "=="}};
    if (holds) {
      g["value"] = *holds;
      g["met"] = *holds;
    } else {
      g["value"] = nullptr;
      g["met"] = nullptr;
    }
    if (!note.empty()) g["note"] = note;
    Put(name, std::move(g));
  }
  // A goal that could not be measured at all.
  void Unmeasured(const std::string& name, const std::string& why) { Holds(name, std::nullopt, why); }

  // A goal checked at several places; Add() each measured place, then Done() enters it.
  class Multi {
   public:
    Multi(std::string limit_text, double limit, std::string op)
        : text_(std::move(limit_text)), limit_(limit), op_(std::move(op)) {}
    void Add(const std::string& where, double value) {
      Add(where, value, std::isfinite(value) && Goals::Test(value, limit_, op_));
    }
    // With the check made by the caller (for a goal that is not a plain comparison).
    void Add(const std::string& where, double value, bool ok) {
      values_[where] = std::round(value * 1000) / 1000;
      met_ = met_ && ok;
    }
    nlohmann::json ToJson(const std::string& none_note) const {
      const bool any = !values_.empty();
      nlohmann::json g = {{"value", any ? values_ : nlohmann::json(nullptr)},
                          {"limit", limit_},
                          {"op", op_},
                          {"met", any ? nlohmann::json(met_) : nlohmann::json(nullptr)},
                          {"note", any ? text_ : text_ + "; not measured: " + none_note}};
      return g;
    }

   private:
    std::string text_;
    double limit_;
    std::string op_;
    nlohmann::json values_ = nlohmann::json::object();
    bool met_ = true;
  };
  void Add(const std::string& name, const Multi& multi, const std::string& none_note) {
    Put(name, multi.ToJson(none_note));
  }

  bool all_measured() const {
    for (const auto& [name, g] : goals_.items()) {
      if (g["met"].is_null()) return false;
    }
    return true;
  }
  bool all_met() const {
    for (const auto& [name, g] : goals_.items()) {
      if (!g["met"].is_boolean() || !g["met"].get<bool>()) return false;
    }
    return true;
  }
  const nlohmann::json& json() const { return goals_; }

  // Writes the goals into `result` (its "goals"), prints `result` as a benchmark's JSON does and
  // returns the exit code: `failed` (non-zero when the benchmark itself failed), else 1 when a goal
  // was not measured (each one named on stderr), else 0.
  int Finish(nlohmann::json result, int failed = 0) const {
    result["goals"] = goals_;
    PrintJson(result);
    if (failed) return failed;
    int code = 0;
    for (const auto& [name, g] : goals_.items()) {
      if (!g["met"].is_null()) continue;
      std::fprintf(stderr, "ebb: error: goal '%s' was not measured%s%s\n", name.c_str(), g.contains("note") ? ": " : "",
                   g.contains("note") ? g["note"].get<std::string>().c_str() : "");
      code = 1;
    }
    return code;
  }

  static bool Test(double value, double limit, const std::string& op) {
    if (op == "<=") return value <= limit;
    if (op == ">=") return value >= limit;
    if (op == "<") return value < limit;
    if (op == ">") return value > limit;
    return value == limit;
  }

 private:
  void Compare(const std::string& name, std::optional<double> value, double limit, const char* op,
               const std::string& unit, const std::string& note) {
    nlohmann::json g = {{"limit", limit}, {"op", op}};
    if (value && std::isfinite(*value)) {
      g["value"] = *value;
      g["met"] = Test(*value, limit, op);
    } else {
      g["value"] = nullptr;
      g["met"] = nullptr;
    }
    if (!unit.empty()) g["unit"] = unit;
    if (!note.empty())
      g["note"] = note;
    else if (g["met"].is_null())
      g["note"] = "nothing was measured";
    Put(name, std::move(g));
  }
  void Put(const std::string& name, nlohmann::json g) { goals_[name] = std::move(g); }

  nlohmann::json goals_ = nlohmann::json::object();
};

}  // namespace ebb::cli
