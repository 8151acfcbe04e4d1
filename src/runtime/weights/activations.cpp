#include "runtime/weights/activations.h"

#include <hwy/highway.h>

#include <algorithm>

#include "core/parallel.h"
#include "runtime/weights/threading.h"

namespace veloxquant::runtime {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

using DF = hn::CappedTag<float, 16>;
using DI32 = hn::RebindToSigned<DF>;

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// Every group of token t, then zeros past cols (a group never straddles cols: cols is a multiple
// of the group).
void quantize_token(const float* x, size_t cols, size_t t, bool quad_sums, QuantizedActivations& a) {
  const DF df;
  const DI32 di32;
  const hn::Rebind<int8_t, DI32> di8;
  const size_t n = hn::Lanes(df), group = a.group, groups = a.groups();
  int8_t* codes = a.codes.data() + t * a.stride;
  float* scale = a.scale.data() + t * groups;
  float* scaled_sum = a.scaled_sum.data() + t * groups;
  int32_t* group_start = a.group_start.data() + t * groups;
  for (size_t g = 0; g < cols / group; ++g) {
    const float* v = x + g * group;
    auto amax = hn::Zero(df);
    for (size_t j = 0; j < group; j += n) amax = hn::Max(amax, hn::Abs(hn::LoadU(df, v + j)));
    const float d = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;
    const auto inv = hn::Set(df, d == 0.0f ? 0.0f : 1.0f / d);
    auto sum = hn::Zero(di32);
    for (size_t j = 0; j < group; j += n) {
      const auto q = hn::NearestInt(hn::Mul(hn::LoadU(df, v + j), inv));
      hn::StoreU(hn::DemoteTo(di8, q), di8, codes + g * group + j);
      sum = hn::Add(sum, q);
    }
    const int32_t s = hn::GetLane(hn::SumOfLanes(di32, sum));
    scale[g] = d;
    scaled_sum[g] = d * static_cast<float>(s);
    group_start[g] = -a.code_offset * s;
  }
  std::fill(codes + cols, codes + a.stride, int8_t{0});
  const size_t used = cols / group;
  std::fill(scale + used, scale + groups, 0.0f);
  std::fill(scaled_sum + used, scaled_sum + groups, 0.0f);
  std::fill(group_start + used, group_start + groups, 0);
  if (!quad_sums) return;
  int32_t* quads = a.quad_start.data() + t * (a.stride / 4);
  for (size_t j = 0; j < a.stride / 4; ++j) {
    const int8_t* c = codes + 4 * j;
    quads[j] = -a.code_offset * (c[0] + c[1] + c[2] + c[3]);
  }
}

}  // namespace

void quantize_activations(const float* x, size_t n, size_t cols, size_t group, int code_offset,
                          bool quad_sums, QuantizedActivations& a) {
  a.tokens = round_up(n, kActivationTokenPad);
  a.stride = round_up(cols, kActivationUnit);
  a.group = group;
  a.code_offset = code_offset;
  const size_t groups = a.groups();
  // Kernels load a whole vector of scales from the last group on: hn::Lanes floats of padding.
  constexpr size_t kTail = 16;
  a.codes.resize(a.tokens * a.stride);
  a.quad_start.resize(quad_sums ? a.tokens * a.stride / 4 : 0);
  a.scale.resize(a.tokens * groups + kTail);
  a.scaled_sum.resize(a.tokens * groups + kTail);
  a.group_start.resize(a.tokens * groups);
  // The padding tokens and the tails read as zeros.
  std::fill(a.codes.begin() + n * a.stride, a.codes.end(), int8_t{0});
  if (quad_sums) std::fill(a.quad_start.begin() + n * a.stride / 4, a.quad_start.end(), 0);
  std::fill(a.scale.begin() + n * groups, a.scale.end(), 0.0f);
  std::fill(a.scaled_sum.begin() + n * groups, a.scaled_sum.end(), 0.0f);
  std::fill(a.group_start.begin() + n * groups, a.group_start.end(), 0);
  // A few operations per value: threads from about 2^16 values (32 tokens of 2048), 30 us on one core.
  const bool parallel = threads_for(n * cols, size_t{1} << 16) > 1;
  constexpr size_t kTokensPerTask = 16;
  parallel_for((n + kTokensPerTask - 1) / kTokensPerTask, [&](size_t i) {
    for (size_t t = i * kTokensPerTask; t < std::min(n, (i + 1) * kTokensPerTask); ++t)
      quantize_token(x + t * cols, cols, t, quad_sums, a);
  }, parallel);
}

}  // namespace veloxquant::runtime
