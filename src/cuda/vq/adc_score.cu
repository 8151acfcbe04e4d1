// VecInfer's asymmetric distance computation (src/codecs/vecinfer/vecinfer_key_codec.cpp): per
// block, the tables q'_s . c_sj of its KV head's group of folded queries (sub-spaces x centroids
// x group floats in shared memory; one thread per centroid loads it once and forms its products
// with every query of the group), then one thread per token sums one lookup per code byte.
// Tables and sums are formed in the CPU codec's order without contraction, so the scores are its
// to the bit.
#include "cuda/common/check.cuh"
#include "cuda/vq/lut_score.cuh"

namespace veloxquant::cuda {
namespace {

struct AdcParams {
  const float* q;          // [kv_heads, G, dim], folded
  const float* codebooks;  // [kv_heads][subspaces][centroids][dims]
  const uint8_t* codes;    // [kv_heads, tokens, subspaces]
  float* scores;           // [kv_heads, G, tokens]
  size_t tokens;
  int dim, dims, subspaces, centroids;
};

template <int G>
__global__ void __launch_bounds__(kScoreThreads) adc_kernel(AdcParams p) {
  constexpr int P = padded_group(G);
  extern __shared__ float4 smem[];
  float4* table = smem;                                                    // [subspaces][centroids][P]
  float* queries = reinterpret_cast<float*>(smem + p.subspaces * p.centroids * P / 4);  // [G][dim]
  const int h = blockIdx.y;
  stage(queries, p.q + size_t(h) * G * p.dim, G * p.dim);
  __syncthreads();
  for (int i = threadIdx.x; i < p.subspaces * p.centroids; i += blockDim.x) {
    const int s = i / p.centroids;
    const float* c = p.codebooks + (size_t(h) * p.subspaces * p.centroids + i) * p.dims;
    float d[P] = {};
    for (int k = 0; k < p.dims; ++k) {
      const float ck = __ldg(c + k);
#pragma unroll
      for (int g = 0; g < G; ++g) d[g] = __fadd_rn(d[g], __fmul_rn(queries[g * p.dim + s * p.dims + k], ck));
    }
#pragma unroll
    for (int v = 0; v < P / 4; ++v) table[i * (P / 4) + v] = make_float4(d[4 * v], d[4 * v + 1], d[4 * v + 2], d[4 * v + 3]);
  }
  __syncthreads();
  size_t first, last;
  split_range(p.tokens, blockIdx.x, gridDim.x, first, last);
  for (size_t t = first + threadIdx.x; t < last; t += blockDim.x) {
    float sums[G];
#pragma unroll
    for (int g = 0; g < G; ++g) sums[g] = 0;
    add_lookups<G>(table, p.subspaces, p.centroids, p.codes + (size_t(h) * p.tokens + t) * p.subspaces, sums);
#pragma unroll
    for (int g = 0; g < G; ++g) p.scores[(size_t(h) * G + g) * p.tokens + t] = sums[g];
  }
}

constexpr void (*kAdcKernels[kMaxScoreGroup])(AdcParams) = {
    adc_kernel<1>, adc_kernel<2>, adc_kernel<3>, adc_kernel<4>,
    adc_kernel<5>, adc_kernel<6>, adc_kernel<7>, adc_kernel<8>};

}  // namespace

void vq_adc_scores(const float* q, const float* codebooks, const uint8_t* codes, size_t dims,
                   size_t centroids, const ScoreShape& shape, float* scores, void* stream) {
  if (dims == 0 || shape.dim % dims != 0) {
    throw Error("vq_adc_scores: sub-vectors of " + std::to_string(dims) + " dimensions; expected a "
                "divisor of head_dim " + std::to_string(shape.dim));
  }
  if (centroids < 1 || centroids > 256) {
    throw Error("vq_adc_scores: " + std::to_string(centroids) + " centroids; expected 1 to 256 (u8 codes)");
  }
  const size_t subspaces = shape.dim / dims;
  const size_t smem = (subspaces * centroids * padded_group(static_cast<int>(shape.group)) + shape.group * shape.dim) * sizeof(float);
  check_score_shape(shape, smem, "vq_adc_scores");
  const auto kernel = kAdcKernels[shape.group - 1];
  const int splits = score_splits(reinterpret_cast<const void*>(kernel), smem, shape);
  const AdcParams p{q, codebooks, codes, scores, shape.tokens, static_cast<int>(shape.dim),
                    static_cast<int>(dims), static_cast<int>(subspaces), static_cast<int>(centroids)};
  kernel<<<dim3(splits, static_cast<unsigned>(shape.kv_heads)), kScoreThreads, smem,
           static_cast<cudaStream_t>(stream)>>>(p);
  VQ_CUDA_CHECK_LAUNCH("adc_kernel");
}

}  // namespace veloxquant::cuda
