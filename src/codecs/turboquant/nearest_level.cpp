#include "codecs/turboquant/nearest_level.h"

#include <hwy/highway.h>

namespace veloxquant::turboquant {
namespace hn = hwy::HWY_NAMESPACE;

void nearest_levels(const ScalarCodebook& codebook, const float* x, size_t n, uint8_t* codes) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(di)> du8;
  const size_t N = hn::Lanes(df);
  const float* b = codebook.boundaries.data();
  const size_t levels = codebook.boundaries.size();
  size_t i = 0;
  // Counting the boundaries at or below each value is branch-free; at most 255 compares per
  // vector, against a binary search per value.
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(df, x + i);
    auto count = hn::Zero(di);
    for (size_t k = 0; k < levels; ++k) {
      // A true mask lane is all ones (-1): subtracting it counts the boundary.
      count = hn::Sub(count, hn::VecFromMask(di, hn::RebindMask(di, hn::Le(hn::Set(df, b[k]), v))));
    }
    hn::StoreU(hn::DemoteTo(du8, count), du8, codes + i);
  }
  for (; i < n; ++i) codes[i] = codebook.quantize(x[i]);
}

}  // namespace veloxquant::turboquant
