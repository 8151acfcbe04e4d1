// Reading TurboQuant's records inside an attention kernel: its own (turboquant_attention.cu) and
// those of the methods that pair their keys with TurboQuant's values (VecInfer's). A value record
// is [f32 norm][head_dim codes of BITS bits]; a tile's codes become fp16 rows of levels in shared
// memory, two codes per lookup in a table of level pairs.
#pragma once

#include <cstdint>

#include "cuda/attention/mma.cuh"
#include "cuda/fp16/fp16_tile.cuh"

namespace veloxquant::cuda {

// 4 * N packed codes of BITS bits, those of channels c .. c + 4N - 1 (c a multiple of 4) of a
// record whose code 0 starts at bit first_bit (a multiple of 32), low bits first. The word after
// them may be read (the stage's slack covers the last record). WORDS: the record is 4-byte
// aligned (every size but head_dim 80 at 3 bits, whose 34 bytes are read as 16-bit halves).
template <int BITS, int N, bool WORDS>
__device__ uint32_t packed_codes(const uint8_t* record, int first_bit, int c) {
  const int bit = first_bit + c * BITS, word = bit / 32, shift = bit % 32;
  const uint32_t w0 = load_u32<WORDS>(record + 4 * word);
  if constexpr (32 % (4 * N * BITS) == 0) return w0 >> shift;  // never spans two words
  else return __funnelshift_r(w0, load_u32<WORDS>(record + 4 * word + 4), shift);
}

// pairs[i + j * 2^BITS] = fp16 (levels[i], levels[j]), block-wide with THREADS threads.
template <int BITS, int THREADS>
__device__ void fill_level_pairs(uint32_t* pairs, const float* levels) {
  for (int i = threadIdx.x; i < (1 << (2 * BITS)); i += THREADS)
    pairs[i] = pack_half2(levels[i & ((1 << BITS) - 1)], levels[i >> BITS]);
}

// A warp decodes the 32 value records of a tile (record stride 4 + D * BITS / 8) into fp16 rows
// of levels, vt in the Fp16Tile layout: a lane takes 8-channel chunks, 16 lanes per token, two
// tokens per pass. The norms stay in the records (attend_tile_values reads them).
template <int D, int BITS>
__device__ void decode_value_tile(const uint8_t* vrec, const uint32_t* value_pairs, uint4* vt, int lane) {
  using Tile = Fp16Tile<D>;
  constexpr int kValueBytes = 4 + D * BITS / 8;
  constexpr uint32_t kMask = (1u << (2 * BITS)) - 1;
#pragma unroll 4
  for (int i = lane; i < kTileTokens * Tile::kChunks; i += kWarp) {
    const int token = i / Tile::kChunks, chunk = i % Tile::kChunks;
    const uint32_t codes = packed_codes<BITS, 2, kValueBytes % 4 == 0>(vrec + token * kValueBytes, 32,
                                                                       8 * chunk);
    uint4 row;
    row.x = value_pairs[codes & kMask];
    row.y = value_pairs[(codes >> (2 * BITS)) & kMask];
    row.z = value_pairs[(codes >> (4 * BITS)) & kMask];
    row.w = value_pairs[(codes >> (6 * BITS)) & kMask];
    vt[Tile::slot(token, chunk)] = row;
  }
}

}  // namespace veloxquant::cuda
