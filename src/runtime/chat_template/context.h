// What rendering carries around: variable scopes, the limits that keep a hostile template from
// running forever or exhausting memory, and the frame each statement executes in.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/chat_template/value.h"

namespace veloxquant::chat_template {

inline constexpr size_t kMaxOutputBytes = kMaxStringBytes;
// Bytes and items that + and ~ may copy in one render: building a string or list by repeated
// concatenation costs quadratic time, which this bounds.
inline constexpr uint64_t kMaxConcatenationWork = uint64_t{1} << 30;
inline constexpr uint64_t kMaxLoopIterations = 1'000'000;
inline constexpr int kMaxCallDepth = 100;  // macro calls in progress at once

// Variables of one level: the template's globals, its top level, one loop iteration, one macro
// call. Reads walk up the parents; writes stay at this level (jinja2's scoping).
struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;
  // A macro defined here keeps the scope alive after its loop iteration ends.
  bool captured = false;

  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent)
      for (const auto& [key, value] : s->vars)
        if (key == name) return &value;
    return nullptr;
  }
  void set(const std::string& name, Value value) {
    for (auto& [key, existing] : vars) {
      if (key == name) {
        existing = std::move(value);
        return;
      }
    }
    vars.emplace_back(name, std::move(value));
  }
};

// One render's state. Scopes live in an arena for the whole render, so macros may point at the
// scope they were defined in without reference cycles.
struct RenderState {
  std::deque<Scope> scopes;
  uint64_t iterations = 0;
  uint64_t concatenation_work = 0;
  int call_depth = 0;

  Scope* new_scope(Scope* parent) {
    scopes.push_back(Scope{parent, {}, false});
    return &scopes.back();
  }
  void count_concatenation(uint64_t units) {
    concatenation_work += units;
    if (concatenation_work > kMaxConcatenationWork)
      fail("string and list concatenation copied more than " + std::to_string(kMaxConcatenationWork >> 20) +
           " MiB in all");
  }
  void count_iteration() {
    if (++iterations > kMaxLoopIterations)
      fail("loops ran more than " + std::to_string(kMaxLoopIterations) + " iterations in all");
  }
};

struct Frame {
  RenderState& state;
  Scope* scope;
  std::string& out;

  void write(std::string_view text) {
    if (out.size() + text.size() > kMaxOutputBytes)
      fail("output exceeds " + std::to_string(kMaxOutputBytes >> 20) + " MiB");
    out.append(text);
  }
};

}  // namespace veloxquant::chat_template
