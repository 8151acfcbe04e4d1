// QJL's key block layout, the CPU codec's exactly (src/codecs/qjl/qjl_key_codec.h), for the sizes
// the GPU runs (proj 256, outlier_proj 128, 1 to 8 outlier channels, head_dim <= 256):
//   outliers channel indices (one byte each, ascending), then per token of the group
//   [kProj sign bits][kOutlierProj sign bits][fp16 inlier RMS][fp16 outlier RMS],
// sign i at bit i % 8 of byte i / 8 (1: the sketch product is > 0). With outliers a multiple of
// 4 every record and every 32-bit word of signs is 4-byte aligned; otherwise (5 and 6 at head_dim
// 80 and 96) a block's records start at any byte, so the append stores bytes.
#pragma once

namespace veloxquant::cuda::qjl {

inline constexpr int kProj = 256, kOutlierProj = 128;
inline constexpr int kTokenBytes = kProj / 8 + kOutlierProj / 8 + 4;
inline constexpr int kNormsAt = kProj / 8 + kOutlierProj / 8;  // inlier RMS, then outlier RMS
static_assert(kTokenBytes % 4 == 0);

struct KeyLayout {
  int outliers, group;
  __host__ __device__ int block_bytes() const { return outliers + group * kTokenBytes; }
};

}  // namespace veloxquant::cuda::qjl
