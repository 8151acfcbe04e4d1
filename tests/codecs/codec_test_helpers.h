// What the codec tests share: a codec's round trip, squared error, and a cache's key and value
// error on a synthetic workload.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "eval/synthetic_kv.h"
#include "expect_error.h"
#include "veloxquant/cache.h"
#include "veloxquant/codec.h"
#include "veloxquant/error.h"

namespace veloxquant::test {

inline std::vector<float> round_trip(const Codec& codec, const std::vector<float>& x, size_t n) {
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  std::vector<float> y(x.size());
  codec.decode(codes.data(), n, y.data());
  return y;
}

inline double sq_error(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
  return e;
}

// Squared error of the keys and of the values a cache of `spec` stores for the whole workload.
inline std::pair<double, double> cache_errors(const std::string& spec, const SyntheticKV& w) {
  KVCache cache(spec, LayerShape{w.kv_heads, w.head_dim, 0, 0});
  cache.append(TensorView::f32(w.keys.data(), {w.tokens, w.kv_heads, w.head_dim}),
               TensorView::f32(w.values.data(), {w.tokens, w.kv_heads, w.head_dim}));
  return {sq_error(w.keys, cache.decode_keys()), sq_error(w.values, cache.decode_values())};
}

// A cache of `spec` is refused with a SpecError whose message names `name` (a parameter).
inline void expect_refused_naming(const std::string& spec, const std::string& name,
                                  const LayerShape& shape = LayerShape{1, 128, 0, 0}) {
  const std::string message = error_message<SpecError>([&] { KVCache cache(spec, shape); });
  EXPECT_FALSE(message.empty()) << spec << " was accepted";
  EXPECT_CONTAINS(message, name);
}

}  // namespace veloxquant::test
