// CommVQ's offline calibration of one KV head: additive codebooks for its pre-RoPE keys, trained
// by EM as the paper trains its RoPE-commutative codebook.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace veloxquant::comm_vq {

struct FittedHead {
  std::vector<float> codebooks;  // [books][entries][dim], each value rounded to fp16
  // Mean squared reconstruction error per key (f32 codebooks, before the fp16 rounding): after
  // the seeding, then after each EM iteration. Never increases.
  std::vector<double> distortion;
};

// keys: `tokens` rows of `dim` floats, `stride` floats apart (one KV head of a [tokens, kv_heads,
// dim] array), before RoPE. Seeding: codebook b is the origin (centroid 0, fixed: a zero key
// decodes to exactly zero) and entries - 1 random rows (derive_seed(seed, {b})) of the residual
// codebooks 0..b-1 leave, each key's code in it the nearest. Then `iterations` EM rounds (Lloyd's
// k-means rounds, for all codebooks together):
//   E-step: each key's codes by greedy residual search (encode_residual), kept only where they
//           reconstruct it better than its current codes, so the step never raises the error;
//   M-step: codebook by codebook, each centroid the least-squares solution given the other
//           codebooks' centroids: the mean of (key - the other codebooks' centroids) over the keys
//           that chose it (a centroid no key chose stays, and so does the origin).
// Every centroid's coordinate pairs are complex numbers, the RoPE-commuting form, by construction
// (comm_vq_key_codec.h), so the M-step's least-squares solution needs no further projection.
// REQUIRES: tokens >= 1, books >= 1, 2 <= entries <= 256.
FittedHead fit_head(const float* keys, size_t tokens, size_t stride, size_t dim, size_t books,
                    size_t entries, size_t iterations, uint64_t seed);

}  // namespace veloxquant::comm_vq
