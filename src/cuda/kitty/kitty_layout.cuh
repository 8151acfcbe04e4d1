// KITTY's key block, the CPU codec's bytes exactly (src/codecs/kitty/kitty_key_codec.h): for a
// block of `group` tokens, the boosted-channel mask (bit c of byte c / 8), fp16 scale[dim] and
// min[dim], then the codes of the other channels (token-major, ascending channels, one LSB-first
// bit stream) and those of the boosted channels likewise. Values are KIVI's (kivi_layout.cuh).
#pragma once

namespace veloxquant::cuda::kitty {

struct KeyLayout {
  int dim, bits, high_bits, boosted, group;
  __host__ __device__ int low_channels() const { return dim - boosted; }
  __host__ __device__ int mask_bytes() const { return (dim + 7) / 8; }
  __host__ __device__ int grids_offset() const { return mask_bytes(); }
  __host__ __device__ int low_offset() const { return grids_offset() + 4 * dim; }
  __host__ __device__ int low_bytes() const { return (group * low_channels() * bits + 7) / 8; }
  __host__ __device__ int high_offset() const { return low_offset() + low_bytes(); }
  __host__ __device__ int high_bytes() const { return (group * boosted * high_bits + 7) / 8; }
  __host__ __device__ int block_bytes() const { return high_offset() + high_bytes(); }
};

}  // namespace veloxquant::cuda::kitty
