// RaBitQ's estimator (src/codecs/rabitq/rabitq_key_codec.cpp), q . k_t = q . c_j + s_t <x_t, P q>
// with x_t the token's signs / sqrt(dim): per block, its KV head's group of queries (staged in
// shared memory with their rotations) gets two tables there, q . c_j for the nlist IVF centroids
// (in the CPU's order, so these are its to the bit) and, for every byte position of the sign bits
// and each of the 256 values the byte can hold, the +-1 sum of the 8 coordinates of P q it covers. A token's sign product is then
// dim / 8 lookups, the same loop as VecInfer's ADC (the sign code is a product quantizer of 8-dim
// sub-spaces whose 256 centroids are the sign patterns).
#include "cuda/common/check.cuh"
#include "cuda/vq/lut_score.cuh"

namespace veloxquant::cuda {
namespace {

struct RabitqParams {
  const float* q;          // [kv_heads, G, dim]
  const float* rotated_q;  // [kv_heads, G, dim]: P q
  const float* centroids;  // [kv_heads][nlist][dim]
  const uint8_t* records;  // [kv_heads, tokens, stride]: f32 s | dim / 8 sign bytes | u8 cluster
  float* scores;           // [kv_heads, G, tokens]
  size_t tokens;
  int dim, nlist;
};

template <int G>
__global__ void __launch_bounds__(kScoreThreads) rabitq_kernel(RabitqParams p) {
  constexpr int P = padded_group(G);
  const int bytes = p.dim / 8, stride = 4 + bytes + 1;
  extern __shared__ float4 smem[];
  float4* signs = smem;                                     // [bytes][256][P]
  float4* centroid_dots = signs + bytes * 256 * P / 4;      // [nlist][P]
  float* queries = reinterpret_cast<float*>(centroid_dots + p.nlist * P / 4);  // [G][dim]
  float* rotated = queries + G * p.dim;                                          // [G][dim]
  const int h = blockIdx.y;
  stage(queries, p.q + size_t(h) * G * p.dim, G * p.dim);
  stage(rotated, p.rotated_q + size_t(h) * G * p.dim, G * p.dim);
  __syncthreads();
  // One thread per (byte position, byte value) forms the +-1 sums of every query of the group.
  for (int i = threadIdx.x; i < bytes * 256; i += blockDim.x) {
    const int b = i / 256, e = i % 256;
    float d[P] = {};
    for (int k = 0; k < 8; ++k) {
      const bool set = e >> k & 1;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float x = rotated[g * p.dim + 8 * b + k];
        d[g] = __fadd_rn(d[g], set ? x : -x);
      }
    }
#pragma unroll
    for (int v = 0; v < P / 4; ++v) signs[i * (P / 4) + v] = make_float4(d[4 * v], d[4 * v + 1], d[4 * v + 2], d[4 * v + 3]);
  }
  // One thread per centroid, after the sign tables' threads: q . c_j in the CPU's order.
  for (int j = blockDim.x - 1 - threadIdx.x; j < p.nlist; j += blockDim.x) {
    const float* c = p.centroids + (size_t(h) * p.nlist + j) * p.dim;
    float d[P] = {};
    for (int k = 0; k < p.dim; ++k) {
      const float ck = __ldg(c + k);
#pragma unroll
      for (int g = 0; g < G; ++g) d[g] = __fadd_rn(d[g], __fmul_rn(queries[g * p.dim + k], ck));
    }
#pragma unroll
    for (int v = 0; v < P / 4; ++v) centroid_dots[j * (P / 4) + v] = make_float4(d[4 * v], d[4 * v + 1], d[4 * v + 2], d[4 * v + 3]);
  }
  __syncthreads();
  const float unit = __fdiv_rn(1.0f, __fsqrt_rn(static_cast<float>(p.dim)));  // the CPU's factor
  size_t first, last;
  split_range(p.tokens, blockIdx.x, gridDim.x, first, last);
  for (size_t t = first + threadIdx.x; t < last; t += blockDim.x) {
    const uint8_t* rec = p.records + (size_t(h) * p.tokens + t) * stride;
    // Records are 4 + dim / 8 + 1 bytes, so s is read byte by byte (little-endian, as stored).
    const uint32_t s_bits = uint32_t(__ldg(rec)) | uint32_t(__ldg(rec + 1)) << 8 |
                            uint32_t(__ldg(rec + 2)) << 16 | uint32_t(__ldg(rec + 3)) << 24;
    const float scale = __fmul_rn(unit, __uint_as_float(s_bits));
    float sums[G];
#pragma unroll
    for (int g = 0; g < G; ++g) sums[g] = 0;
    add_lookups<G>(signs, bytes, 256, rec + 4, sums);
    const float* dots = reinterpret_cast<const float*>(centroid_dots + __ldg(rec + 4 + bytes) * (P / 4));
#pragma unroll
    for (int g = 0; g < G; ++g)
      p.scores[(size_t(h) * G + g) * p.tokens + t] = __fadd_rn(__fmul_rn(scale, sums[g]), dots[g]);
  }
}

constexpr void (*kRabitqKernels[kMaxScoreGroup])(RabitqParams) = {
    rabitq_kernel<1>, rabitq_kernel<2>, rabitq_kernel<3>, rabitq_kernel<4>,
    rabitq_kernel<5>, rabitq_kernel<6>, rabitq_kernel<7>, rabitq_kernel<8>};

}  // namespace

void rabitq_scores(const float* q, const float* rotated_q, const float* centroids, size_t nlist,
                   const uint8_t* records, const ScoreShape& shape, float* scores, void* stream) {
  if (shape.dim == 0 || shape.dim % 8 != 0) {
    throw Error("rabitq_scores: head_dim " + std::to_string(shape.dim) + "; expected a multiple of 8 "
                "(whole bytes of sign bits)");
  }
  if (nlist < 1 || nlist > 256) {
    throw Error("rabitq_scores: " + std::to_string(nlist) + " IVF clusters; expected 1 to 256 (u8 cluster index)");
  }
  const size_t smem = ((shape.dim / 8 * 256 + nlist) * padded_group(static_cast<int>(shape.group)) +
                       2 * shape.group * shape.dim) * sizeof(float);
  check_score_shape(shape, smem, "rabitq_scores");
  const auto kernel = kRabitqKernels[shape.group - 1];
  const int splits = score_splits(reinterpret_cast<const void*>(kernel), smem, shape);
  const RabitqParams p{q, rotated_q, centroids, records, scores, shape.tokens,
                       static_cast<int>(shape.dim), static_cast<int>(nlist)};
  kernel<<<dim3(splits, static_cast<unsigned>(shape.kv_heads)), kScoreThreads, smem,
           static_cast<cudaStream_t>(stream)>>>(p);
  VQ_CUDA_CHECK_LAUNCH("rabitq_kernel");
}

}  // namespace veloxquant::cuda
