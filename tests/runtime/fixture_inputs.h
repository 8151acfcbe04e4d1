// What the runtime tests on random-weight fixtures share: a fixture as a loaded model, a fixed
// prompt within its vocabulary, and checks of the logits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dev/fixture_model.h"
#include "veloxquant/gguf.h"
#include "veloxquant/model.h"

namespace veloxquant::test {

// The fixture written to GGUF bytes in memory and loaded.
inline Model model_of(const dev::Fixture& f) {
  GgufWriter w;
  for (const auto& [key, value] : f.metadata) w.add_metadata(key, value);
  for (const auto& t : f.tensors) w.add_tensor(t.name, t.type, t.dims, t.data);
  return Model::from_gguf(GgufFile::parse(w.to_bytes()));
}

inline std::vector<int32_t> some_tokens(const Model& m, size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11) % m.config().vocab);
  return t;
}

inline bool all_finite(const std::vector<float>& x) {
  for (float v : x)
    if (!std::isfinite(v)) return false;
  return true;
}

// The largest difference between the logits of `tokens` evaluated all at once by `whole` and one
// at a time by `stepped`, relative to the largest logit.
inline double stepped_vs_whole(Session& whole, Session& stepped, const std::vector<int32_t>& tokens) {
  const size_t vocab = whole.model().config().vocab;
  const std::vector<float> all = whole.eval(tokens, Logits::All);
  double worst = 0, scale = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<float> one = stepped.eval(std::vector<int32_t>{tokens[t]}, Logits::Last);
    for (size_t i = 0; i < vocab; ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(one[i] - all[t * vocab + i])));
      scale = std::max(scale, static_cast<double>(std::abs(all[t * vocab + i])));
    }
  }
  return worst / scale;
}

}  // namespace veloxquant::test
