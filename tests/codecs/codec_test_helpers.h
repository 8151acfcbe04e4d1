// What the codec tests share: a codec's round trip, squared error, and a cache's key and value
// error on a synthetic workload.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "eval/synthetic_kv.h"
#include "expect_error.h"
#include "test_data.h"
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

// Prefill's frame of a low-rank codec (Codec::decodes_in_basis, basis_width() < dim): n encoded
// tokens decoded there ([n][dim], the columns past basis_width() left zero) keep the products of
// the nq queries q with the decoded tokens once q goes through queries_to_basis, and from_basis
// gives decode(). Returns what decode_in_basis wrote.
inline std::vector<float> expect_frame_keeps_products(const Codec& codec, const std::vector<float>& q,
                                                      size_t nq, const std::vector<uint8_t>& codes,
                                                      size_t n) {
  const size_t d = codec.dim(), width = codec.basis_width();
  std::vector<float> natural(n * d), in_frame(n * d, 0.0f),
      q_frame(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(nq * d));
  codec.decode(codes.data(), n, natural.data());
  codec.decode_in_basis(codes.data(), n, in_frame.data());
  codec.queries_to_basis(q_frame.data(), nq);
  for (size_t i = 0; i < nq; ++i)
    for (size_t t = 0; t < n; ++t) {
      const double want = test::dot(q.data() + i * d, natural.data() + t * d, d);
      EXPECT_NEAR(test::dot(q_frame.data() + i * d, in_frame.data() + t * d, width), want,
                  1e-4 * (1 + std::fabs(want)))
          << "head_dim " << d << " query " << i << " token " << t;
    }
  std::vector<float> back = in_frame;
  codec.from_basis(back.data(), n);
  EXPECT_LT(test::relative_l2(back, natural), 1e-5) << "head_dim " << d;
  return in_frame;
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
