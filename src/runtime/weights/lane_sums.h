// The f32 vectors and the row-sum store shared by the f32 and the integer row kernels. Highway
// with static dispatch: include only from the library's own sources.
#pragma once

#include <hwy/highway.h>

#include "core/sum_lanes4.h"

namespace veloxquant::runtime::kernels {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes: a unit of 256 codes of the integer kernels is whole vectors of bytes, and its
// 16 group scales fit one vector.
using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;

// y[t * ldy + i] = the lane sum of acc[i][t] for R (1 or 4) rows and the first nt tokens. A
// single row takes the same reduction tree as a row of four (adding zeros is exact), so a row's
// result does not depend on the rows beside it.
template <size_t R, size_t T>
HWY_INLINE void store_row_sums(DF df, const VF (&acc)[R][T], size_t nt, float* y, size_t ldy) {
  for (size_t t = 0; t < nt; ++t) {
    if constexpr (R == 4) {
      const VF v[4] = {acc[0][t], acc[1][t], acc[2][t], acc[3][t]};
      simd::sum_lanes4(df, v, y + t * ldy);
    } else {
      const VF v[4] = {acc[0][t], hn::Zero(df), hn::Zero(df), hn::Zero(df)};
      float sum[4];
      simd::sum_lanes4(df, v, sum);
      y[t * ldy] = sum[0];
    }
  }
}

}  // namespace veloxquant::runtime::kernels
