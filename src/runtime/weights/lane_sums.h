// Horizontal sums of four f32 vectors at once, shared by the f32 and the integer row kernels.
// Highway with static dispatch: include only from the library's own sources.
#pragma once

#include <hwy/highway.h>

namespace veloxquant::runtime::kernels {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes, so that a whole number of vectors always fills a 32-element quant block.
using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;

// Whether sums4 can keep four partial sums side by side in each 128-bit block.
inline constexpr bool kBlockSums = HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE;

// Adds the 128-bit blocks of v and stores the resulting 4 lanes.
template <class D, class V>
HWY_INLINE void store_block_sum(D d, V v, float* out) {
  if constexpr (hn::MaxLanes(d) > 4) {
    const hn::Half<D> dh;
    store_block_sum(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, d, out);
  }
}

// out[i] = the sum of the lanes of a_i. Two rounds of interleave-and-add gather the four partial
// sums side by side in every block: a third of the shuffles of four separate reductions, which
// is most of the work for stories260K's 64-wide rows.
HWY_INLINE void sums4(DF df, VF a0, VF a1, VF a2, VF a3, float* out) {
  if constexpr (kBlockSums) {
    const hn::Repartition<double, DF> dd;
    const auto s01 = hn::BitCast(dd, hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1)));
    const auto s23 = hn::BitCast(dd, hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3)));
    store_block_sum(df, hn::Add(hn::BitCast(df, hn::InterleaveLower(dd, s01, s23)),
                                hn::BitCast(df, hn::InterleaveUpper(dd, s01, s23))), out);
  } else {
    out[0] = hn::GetLane(hn::SumOfLanes(df, a0));
    out[1] = hn::GetLane(hn::SumOfLanes(df, a1));
    out[2] = hn::GetLane(hn::SumOfLanes(df, a2));
    out[3] = hn::GetLane(hn::SumOfLanes(df, a3));
  }
}

// y[t * ldy + i] = the lane sum of acc[i][t] for R (1 or 4) rows and the first nt tokens. A
// single row takes the same reduction tree as a row of four (adding zeros is exact), so a row's
// result does not depend on the rows beside it.
template <size_t R, size_t T>
HWY_INLINE void store_row_sums(DF df, const VF (&acc)[R][T], size_t nt, float* y, size_t ldy) {
  for (size_t t = 0; t < nt; ++t) {
    if constexpr (R == 4) {
      sums4(df, acc[0][t], acc[1][t], acc[2][t], acc[3][t], y + t * ldy);
    } else {
      float sum[4];
      sums4(df, acc[0][t], hn::Zero(df), hn::Zero(df), hn::Zero(df), sum);
      y[t * ldy] = sum[0];
    }
  }
}

}  // namespace veloxquant::runtime::kernels
