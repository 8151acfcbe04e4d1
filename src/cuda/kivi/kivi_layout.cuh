// KIVI's byte layout, the CPU codec's exactly (src/codecs/kivi/kivi_key_codec.h, lane_tiles.h,
// kivi_value_codec.h), for every head_dim the GPU takes (each a multiple of 16):
//  - key block of G tokens: fp16 scale[D], fp16 min[D], then G/16 tiles of 16 tokens. A tile is
//    D / (4 * cpb) word rows of 64 bytes; byte i of lane (= token) in row r holds, at shift
//    bits * k, the code of channel r * 4 * cpb + 4k + i (cpb = 8 / bits codes per byte).
//  - value block of 4 tokens: the codes, then fp16 scale[groups][4], fp16 min[groups][4]. Where
//    head_dim is a multiple of 16 * cpb and the value group a multiple of 16 dividing it, the
//    codes are D / (16 * cpb) word rows of 64 bytes, byte i (= token) of lane L in row r holding,
//    at shift bits * k, the code of channel r * 16 * cpb + 16k + L; otherwise (head_dim 80, 96 at
//    2 bits, groups that do not divide it) one dense stream of the 4 x D codes, low bits first,
//    and the last group of a token may be shorter.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

namespace veloxquant::cuda::kivi {

struct KeyLayout {
  int dim, bits, group;
  __host__ __device__ int codes_per_byte() const { return 8 / bits; }
  __host__ __device__ int row_channels() const { return 4 * codes_per_byte(); }
  __host__ __device__ int tile_bytes() const { return 16 * dim * bits / 8; }
  __host__ __device__ int block_bytes() const { return 4 * dim + group * dim * bits / 8; }
};

struct ValueLayout {
  int dim, bits, group;  // group: channels per scale, min(kivi group, dim)
  __host__ __device__ int codes_per_byte() const { return 8 / bits; }
  __host__ __device__ int row_channels() const { return 16 * codes_per_byte(); }
  // Lane quads, as KiviValueCodec decides; false: the dense stream.
  __host__ __device__ bool tiled() const {
    return dim % row_channels() == 0 && group % 16 == 0 && dim % group == 0;
  }
  __host__ __device__ int groups() const { return (dim + group - 1) / group; }
  __host__ __device__ int quad_bytes() const { return 4 * dim * bits / 8; }
  __host__ __device__ int block_bytes() const { return quad_bytes() + 16 * groups(); }

  // Token t, channel c of a stream of value blocks, decoded like KiviValueCodec::decode.
  __device__ float decode(const uint8_t* blocks, int t, int c) const {
    const uint8_t* block = blocks + static_cast<size_t>(t / 4) * block_bytes();
    const int i = t % 4, rc = row_channels(), k = c % rc / 16, lane = c % 16;
    const int bit = (i * dim + c) * bits;  // dense: codes never straddle a byte (bits divides 8)
    const unsigned byte = tiled() ? block[c / rc * 64 + lane * 4 + i] >> (bits * k)
                                  : block[bit / 8] >> (bit % 8);
    const unsigned code = byte & ((1u << bits) - 1u);
    const __half* params = reinterpret_cast<const __half*>(block + quad_bytes());
    const int g = c / group;
    return __half2float(params[4 * groups() + g * 4 + i]) + __half2float(params[g * 4 + i]) * static_cast<float>(code);
  }
};

}  // namespace veloxquant::cuda::kivi
