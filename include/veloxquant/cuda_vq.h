// The CUDA backend's vector-quantization kernels (built with -DVELOXQUANT_CUDA=ON, sm_90): the hot
// paths of the codecs that store keys as indices into codebooks.
//  - vq_assign(): product-VQ nearest-centroid assignment, the codes of the `vecinfer` key codec
//    (src/codecs/vecinfer/) for keys already smoothed and rotated. One thread per sub-vector keeps
//    the running argmin in registers against its sub-space's codebook in shared memory; no
//    distance tensor is written.
//  - vq_adc_scores(): VecInfer's asymmetric distance computation, scores straight from the codes.
//  - rabitq_scores(): RaBitQ's estimator (src/codecs/rabitq/) from its records.
//  - comm_vq_gather_rope(): CommVQ's keys (src/codecs/comm_vq/) as attention reads them: the sum
//    of each token's centroids, rotated by RoPE to its position, in one pass.
// Both scorers build per-query tables in shared memory (query . centroid products; for RaBitQ also
// the +-1 sums of every byte of sign bits) and sum one lookup per code byte of a token.
// Kernels, bounds and measured figures: docs/cuda.md. This header needs no CUDA headers: device
// pointers are plain pointers, streams are cudaStream_t passed as void*. Shapes a kernel has no
// build for throw veloxquant::Error naming the value; every CUDA call and launch is checked.
#pragma once

#include <cstddef>
#include <cstdint>

#include "veloxquant/rope.h"

namespace veloxquant::cuda {

// x: device f32 [n, dim], keys already transformed as the codec encodes them (y = R (k / lambda));
// codebooks: device f32 [dim / dims][centroids][dims]; codes: device u8 [n, dim / dims], code s of
// row t the index of the centroid of sub-space s nearest to x[t, s*dims .. +dims) in squared L2
// (lowest index on ties). dims in {4, 8, 16}, dividing dim; 1 <= centroids <= 256.
void vq_assign(const float* x, size_t n, size_t dim, const float* codebooks, size_t dims,
               size_t centroids, uint8_t* codes, void* stream = nullptr);

// The shape both scorers share: `kv_heads` streams of `tokens` tokens, `group` query heads per
// KV head (1..8), head_dim `dim`. Scores: device f32 [kv_heads, group, tokens].
struct ScoreShape {
  size_t kv_heads = 1;
  size_t group = 1;
  size_t tokens = 0;
  size_t dim = 128;
};

// VecInfer ADC: q device f32 [kv_heads, group, dim], each query already folded into the key space
// (q' = R (lambda q), as VecinferKeyCodec::score does); codebooks device f32 [kv_heads][dim / dims]
// [centroids][dims]; codes device u8 [kv_heads, tokens, dim / dims] (the codec's records).
// scores[h, i, t] = sum_s q'_{h,i,s} . c_{h,s,code[h,t,s]}. dims divides dim, 1 <= centroids <= 256,
// and the group's tables (group x dim / dims x centroids floats) fit in shared memory.
void vq_adc_scores(const float* q, const float* codebooks, const uint8_t* codes, size_t dims,
                   size_t centroids, const ScoreShape& shape, float* scores, void* stream = nullptr);

// RaBitQ: q and rotated_q device f32 [kv_heads, group, dim] (the query and P q, P the codec's
// rotation); centroids device f32 [kv_heads][nlist][dim] (each head's IVF centroids); records
// device u8 [kv_heads, tokens, 4 + dim / 8 + 1] in the codec's layout (f32 s | sign bits | u8
// cluster). scores[h, i, t] = q . c_j + s / sqrt(dim) * sum_c (P q)[c] (bit c ? 1 : -1), as
// RabitqKeyCodec::score computes it. dim a multiple of 8, 1 <= nlist <= 256.
void rabitq_scores(const float* q, const float* rotated_q, const float* centroids, size_t nlist,
                   const uint8_t* records, const ScoreShape& shape, float* scores,
                   void* stream = nullptr);

// CommVQ: codes device u8 [kv_heads, tokens, books] (the codec's records: one centroid index per
// codebook); codebooks device f32 [kv_heads][books][entries][dim]; positions device int64
// [tokens]; out device f32 [kv_heads, tokens, dim]. out[h, t] = R(positions[t]) sum_b
// c_{h,b,codes[h,t,b]}: the centroids summed in codebook order in f32 as comm_vq::decode_sum does,
// then each coordinate pair rotated as apply_rope rotates it (angles in double, rope.layout's
// pairs over rope.dims), before the only write. dim a multiple of 4 up to 256, rope.dims <= dim,
// 1 <= books, 1 <= entries <= 256.
void comm_vq_gather_rope(const uint8_t* codes, const float* codebooks, size_t books, size_t entries,
                         const int64_t* positions, const RopeParams& rope, size_t kv_heads,
                         size_t tokens, size_t dim, float* out, void* stream = nullptr);

// Bytes of one RaBitQ record of head_dim `dim`.
inline size_t rabitq_record_bytes(size_t dim) { return 4 + dim / 8 + 1; }

}  // namespace veloxquant::cuda
