#include "codecs/qjl/sign_sums.h"

#include <hwy/highway.h>

namespace veloxquant::qjl {
namespace hn = hwy::HWY_NAMESPACE;

namespace {
using DF = hn::ScalableTag<float>;

float scalar_masked_sum(const float* u, const uint8_t* bits, size_t begin, size_t m) {
  float s = 0;
  for (size_t i = begin; i < m; ++i) s += ((bits[i / 8] >> (i % 8)) & 1) ? u[i] : 0.0f;
  return s;
}
}  // namespace

void masked_sums(const float* u, size_t nu, size_t stride, const uint8_t* bits, size_t m,
                 float* out) {
  const DF df;
  const size_t L = hn::Lanes(df);
  // Each run of Lanes bits becomes a lane mask directly, which needs whole bytes per vector;
  // narrower targets (4 lanes) take the scalar loop.
  const size_t vec_end = L % 8 == 0 ? m - m % L : 0;
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  for (size_t i = 0; i < vec_end; i += L) {
    const auto mask = hn::LoadMaskBits(df, bits + i / 8);
    a0 = hn::Add(a0, hn::IfThenElseZero(mask, hn::LoadU(df, u + i)));
    if (nu > 1) a1 = hn::Add(a1, hn::IfThenElseZero(mask, hn::LoadU(df, u + stride + i)));
    if (nu > 2) a2 = hn::Add(a2, hn::IfThenElseZero(mask, hn::LoadU(df, u + 2 * stride + i)));
    if (nu > 3) a3 = hn::Add(a3, hn::IfThenElseZero(mask, hn::LoadU(df, u + 3 * stride + i)));
  }
  const hn::Vec<DF> acc[4] = {a0, a1, a2, a3};
  for (size_t j = 0; j < nu; ++j) {
    out[j] = hn::GetLane(hn::SumOfLanes(df, acc[j])) +
             scalar_masked_sum(u + j * stride, bits, vec_end, m);
  }
}

}  // namespace veloxquant::qjl
