// Four horizontal sums at once, for Highway kernels compiled with static dispatch: two rounds of
// in-block interleaves leave every 128-bit block holding its four partial sums side by side,
// then the blocks are folded in halves. Far fewer shuffles than four separate reductions.
// Include from a .cpp that includes <hwy/highway.h>.
#pragma once

#include <hwy/highway.h>

namespace veloxquant::simd {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE void store_block_sums(D d, hn::Vec<D> v, float* out) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    store_block_sums(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, d, out);
  }
}

// out[i] = sum of the lanes of v[i], i < 4.
template <class D>
HWY_INLINE void sum_lanes4(D df, const hn::Vec<D>* v, float* out) {
  if constexpr (hn::MaxLanes(D()) < 4) {
    for (size_t i = 0; i < 4; ++i) out[i] = hn::GetLane(hn::SumOfLanes(df, v[i]));
  } else {
    const hn::Repartition<double, D> dd;
    const auto p = hn::Add(hn::InterleaveLower(df, v[0], v[1]), hn::InterleaveUpper(df, v[0], v[1]));
    const auto q = hn::Add(hn::InterleaveLower(df, v[2], v[3]), hn::InterleaveUpper(df, v[2], v[3]));
    const auto pd = hn::BitCast(dd, p), qd = hn::BitCast(dd, q);
    store_block_sums(df, hn::Add(hn::BitCast(df, hn::InterleaveLower(dd, pd, qd)),
                                 hn::BitCast(df, hn::InterleaveUpper(dd, pd, qd))),
                     out);
  }
}

}  // namespace veloxquant::simd
