#include "codecs/ratequant/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace veloxquant::ratequant {
namespace {

// out[i] = softmax_j<=i(q_i . k_j / sqrt(d)) v_j for the n rows of q, k, v ([n, d] each).
std::vector<float> causal_attention(const float* q, const float* k, const float* v, size_t n, size_t d) {
  std::vector<float> out(n * d, 0.0f);
  std::vector<double> p(n);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (size_t i = 0; i < n; ++i) {
    double top = -INFINITY;
    for (size_t j = 0; j <= i; ++j) {
      double s = 0;
      for (size_t c = 0; c < d; ++c) s += static_cast<double>(q[i * d + c]) * k[j * d + c];
      p[j] = s * scale;
      top = std::max(top, p[j]);
    }
    double sum = 0;
    for (size_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - top));
    for (size_t j = 0; j <= i; ++j) {
      const auto w = static_cast<float>(p[j] / sum);
      for (size_t c = 0; c < d; ++c) out[i * d + c] += w * v[j * d + c];
    }
  }
  return out;
}

// x's first whole blocks of `codec` encoded and decoded in place.
void round_trip(const Codec& codec, size_t block, std::vector<float>& x, size_t n) {
  const size_t m = n / block * block;
  if (m == 0) return;
  std::vector<uint8_t> codes(codec.code_bytes(m));
  codec.encode(x.data(), m, codes.data());
  codec.decode(codes.data(), m, x.data());
}

}  // namespace

std::vector<double> attention_distortion(const std::vector<LayerCodecs>& codecs, const HeadSamples& s) {
  const size_t n = s.length, d = s.dim;
  std::vector<double> err(codecs.size(), 0.0);
  std::vector<float> k(n * d), v(n * d);
  for (size_t seq = 0; seq < s.sequences; ++seq) {
    for (size_t t = 0; t < n; ++t) {
      const size_t row = (seq * n + t) * s.stride;
      std::copy_n(s.keys + row, d, k.begin() + static_cast<std::ptrdiff_t>(t * d));
      std::copy_n(s.values + row, d, v.begin() + static_cast<std::ptrdiff_t>(t * d));
    }
    const std::vector<float> exact = causal_attention(k.data(), k.data(), v.data(), n, d);
    for (size_t at = 0; at < codecs.size(); ++at) {
      const LayerCodecs& c = codecs[at];
      const size_t block = std::lcm(c.key->block_tokens(), c.value->block_tokens());
      std::vector<float> kq = k, vq = v;
      round_trip(*c.key, block, kq, n);
      round_trip(*c.value, block, vq, n);
      const std::vector<float> stored = causal_attention(k.data(), kq.data(), vq.data(), n, d);
      for (size_t i = 0; i < n * d; ++i) {
        const double e = static_cast<double>(stored[i]) - exact[i];
        err[at] += e * e;
      }
    }
  }
  for (double& e : err) e /= static_cast<double>(s.sequences * n);
  return err;
}

}  // namespace veloxquant::ratequant
