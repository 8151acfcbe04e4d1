#include "runtime/weights/activations.h"

#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/parallel.h"
#include "runtime/weights/threading.h"
#include "veloxquant/tensor.h"

namespace veloxquant::runtime {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

using DF = hn::CappedTag<float, 16>;
using DI32 = hn::RebindToSigned<DF>;

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

float round_to_half(float v) { return f16_to_f32(f32_to_f16(v)); }

// Every block of token t, group by group (a block never straddles cols: cols is a multiple of the
// block); what lies past cols stays as quantize_activations zeroed it.
void quantize_token(const float* x, size_t cols, size_t t, ActivationRounding rounding,
                    QuantizedActivations& a) {
  const DF df;
  const DI32 di32;
  const hn::Rebind<int8_t, DI32> di8;
  const size_t n = hn::Lanes(df), group = a.group;
  HWY_ALIGN int8_t q[32];
  for (size_t b = 0; b < cols / rounding.block; ++b) {
    const float* block = x + b * rounding.block;
    auto amax = hn::Zero(df);
    auto finite = hn::FirstN(df, n);
    for (size_t j = 0; j < rounding.block; j += n) {
      const auto x_j = hn::LoadU(df, block + j);
      amax = hn::Max(amax, hn::Abs(x_j));
      finite = hn::And(finite, hn::IsFinite(x_j));
    }
    const size_t first_group = b * rounding.block / group, groups = rounding.block / group;
    if (!hn::AllTrue(df, finite)) {
      // A NaN or infinity has no int8 code: the block's scales are NaN, so every product with
      // this token is NaN as in f32, and its codes stay zero (their sums cannot overflow).
      for (size_t g = first_group; g < first_group + groups; ++g) {
        const size_t at = a.group_index(t, g);
        a.scale[at] = a.scaled_sum[at] = std::numeric_limits<float>::quiet_NaN();
      }
      continue;
    }
    // llama.cpp's operations, in its order: the codes depend on which of them rounds.
    const float max_abs = hn::GetLane(hn::MaxOfLanes(df, amax));
    const float inv_f = max_abs == 0.0f ? 0.0f : 127.0f / max_abs;
    const float d = rounding.half_scale ? max_abs / 127.0f : (inv_f == 0.0f ? 0.0f : 1.0f / inv_f);
    const auto inv = hn::Set(df, inv_f);
    for (size_t g = first_group; g < first_group + groups; ++g) {
      const float* v = x + g * group;
      auto sum = hn::Zero(di32);
      for (size_t j = 0; j < group; j += n) {
        const auto codes = hn::NearestInt(hn::Mul(hn::LoadU(df, v + j), inv));
        hn::StoreU(hn::DemoteTo(di8, codes), di8, q + j);
        sum = hn::Add(sum, codes);
      }
      const int32_t s = hn::GetLane(hn::SumOfLanes(di32, sum));
      const size_t at = a.group_index(t, g);
      const float scaled_sum = d * static_cast<float>(s);
      a.scale[at] = rounding.half_scale ? round_to_half(d) : d;
      a.scaled_sum[at] = rounding.half_scale ? round_to_half(scaled_sum) : scaled_sum;
      a.group_start[at] = -a.code_offset * s;
      if (a.layout == ActivationLayout::kRows) {
        std::memcpy(a.codes.data() + a.code_index(t, g * group), q, group);
        int32_t* quads = a.quad_start.data() + t * (a.stride / 4) + g * group / 4;
        for (size_t j = 0; j < group / 4; ++j)
          quads[j] = -a.code_offset * (q[4 * j] + q[4 * j + 1] + q[4 * j + 2] + q[4 * j + 3]);
      } else {
        for (size_t j = 0; j < group; j += 4)
          std::memcpy(a.codes.data() + a.code_index(t, g * group + j), q + j, 4);
      }
    }
  }
}

}  // namespace

void quantize_activations(const float* x, size_t n, size_t cols, size_t group, int code_offset,
                          ActivationRounding rounding, ActivationLayout layout, QuantizedActivations& a) {
  a.layout = layout;
  a.tokens = round_up(n, kActivationTokenPad);
  a.stride = round_up(cols, kActivationUnit);
  a.group = group;
  a.code_offset = code_offset;
  const size_t groups = a.groups();
  // Kernels load a whole vector of scales from the last group on: hn::Lanes floats of padding.
  constexpr size_t kTail = 16;
  const bool rows = layout == ActivationLayout::kRows;
  // Zeros first, for the padding tokens and what lies past cols (a few percent of quantizing).
  a.codes.assign(a.tokens * a.stride, 0);
  a.quad_start.assign(rows ? a.tokens * a.stride / 4 : 0, 0);
  a.scale.assign(a.tokens * groups + kTail, 0.0f);
  a.scaled_sum.assign(a.tokens * groups + kTail, 0.0f);
  a.group_start.assign(a.tokens * groups, 0);
  // A few operations per value: threads from about 2^16 values (32 tokens of 2048), 30 us on one core.
  const bool parallel = threads_for(n * cols, size_t{1} << 16) > 1;
  constexpr size_t kTokensPerTask = 16;
  parallel_for((n + kTokensPerTask - 1) / kTokensPerTask, [&](size_t i) {
    for (size_t t = i * kTokensPerTask; t < std::min(n, (i + 1) * kTokensPerTask); ++t)
      quantize_token(x + t * cols, cols, t, rounding, a);
  }, parallel);
}

}  // namespace veloxquant::runtime
