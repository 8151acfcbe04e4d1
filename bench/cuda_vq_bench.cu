// CUDA vector-quantization benchmark: each fused kernel of veloxquant/cuda_vq.h against a plain
// implementation of the same result, side by side in one run, on random codebooks, codes and
// queries generated here (no CPU library):
//  - assignment of N rows of head_dim 128 to 256 centroids per 8-dim sub-space: vq_assign against
//    a [sub-spaces, N, centroids] f32 distance tensor written by one kernel and reduced by an
//    argmin kernel;
//  - VecInfer ADC scores of 8 KV heads x 8 query heads over N tokens: vq_adc_scores against
//    decoding the keys to fp16 rows (codebook gather) and a dot-product kernel;
//  - RaBitQ scores (nlist 16), same shape: rabitq_scores against decoding (centroid plus scaled
//    signs) to fp16 rows and the same dot kernel. The bench takes the rotation P = I, so the
//    decoded rows live in the space of the query as given and both paths compute one thing;
//  - CommVQ keys of 8 KV heads over N tokens (4 codebooks of 256 centroids, RoPE over every pair
//    at positions 0..N-1): comm_vq_gather_rope against a gather kernel writing the unrotated sums
//    and a RoPE kernel rotating them in place (the same arithmetic, so the results are equal).
// Writes OUT_DIR/cuda_vq.json and OUT_DIR/cuda_vq.md.
//
//   veloxquant_cuda_vq_bench --out OUT_DIR [--iters N>=50]
//
// Each timing is the median of N single calls (the plain paths: both launches) timed with CUDA
// events after warm-up; inputs rotate over enough copies to pass 3x L2, so they come from HBM.
// GB/s counts the bytes each path reads (its inputs, and for the plain paths the intermediate they
// wrote and read back); bytes written are listed apart. Each fused result is checked against the
// plain one in the same run.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"
#include "cuda_bench_util.cuh"
#include "veloxquant/cuda_vq.h"

namespace vc = veloxquant::cuda;
using vc::bench::DeviceBuffer;
using vc::bench::kL2Bytes;
using vc::bench::median_us;

namespace {

constexpr size_t kDim = 128, kKvHeads = 8, kGroup = 8, kDims = 8, kCentroids = 256, kNlist = 16;
constexpr size_t kSub = kDim / kDims;
constexpr size_t kBooks = 4, kEntries = 256;  // CommVQ's defaults
constexpr int kThreads = 256;

// ---- random inputs ----

__device__ inline uint64_t mix(uint64_t h) {
  h ^= h >> 31, h *= 0x94D049BB133111EBull, h ^= h >> 29;
  return h;
}
// Pseudo-normal floats (sum of four uniforms) times `scale`.
__global__ void fill_normal(float* x, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = (i + seed * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    float s = 0;
    for (int k = 0; k < 4; ++k) h = mix(h), s += static_cast<float>(h >> 40) / 16777216.0f;
    x[i] = (s - 2.0f) * 1.7f * scale;
  }
}
// Uniform bytes below `limit`.
__global__ void fill_bytes(uint8_t* x, size_t n, uint64_t seed, unsigned limit) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = static_cast<uint8_t>(mix((i + 1) * 0xBF58476D1CE4E5B9ull + seed) % limit);
}
// RaBitQ records: s in [0.5, 1.5), random sign bytes, a cluster < nlist.
__global__ void fill_records(uint8_t* r, size_t tokens, size_t stride, uint64_t seed) {
  for (size_t t = blockIdx.x * size_t(blockDim.x) + threadIdx.x; t < tokens; t += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = mix((t + 1) * 0x9E3779B97F4A7C15ull + seed);
    const float s = 0.5f + static_cast<float>(h >> 40) / 16777216.0f;
    std::memcpy(r + t * stride, &s, 4);
    for (size_t b = 4; b + 1 < stride; ++b) h = mix(h + b), r[t * stride + b] = static_cast<uint8_t>(h);
    r[t * stride + stride - 1] = static_cast<uint8_t>(mix(h) % kNlist);
  }
}

// ---- plain implementations ----

// dist[s][t][j] = |x_t,s - c_s,j|^2, one thread per element, summed as vq_assign sums.
__global__ void distance_tensor(const float* x, size_t n, const float* books, float* dist) {
  const size_t total = kSub * n * kCentroids;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t s = i / (n * kCentroids), t = i / kCentroids % n, j = i % kCentroids;
    const float* v = x + t * kDim + s * kDims;
    const float* c = books + (s * kCentroids + j) * kDims;
    float d = 0;
    for (size_t k = 0; k < kDims; ++k) {
      const float e = v[k] - c[k];
      d = fmaf(e, e, d);
    }
    dist[i] = d;
  }
}
// codes[t][s] = argmin_j dist[s][t][j] (lowest index on ties), one warp per (s, t).
__global__ void argmin_rows(const float* dist, size_t n, uint8_t* codes) {
  const size_t warp = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= kSub * n) return;
  const float* row = dist + warp * kCentroids;
  float best = FLT_MAX;
  int at = 0;
  for (int j = lane; j < int(kCentroids); j += 32)
    if (row[j] < best) best = row[j], at = j;
  for (int o = 16; o > 0; o /= 2) {
    const float b = __shfl_xor_sync(0xFFFFFFFFu, best, o);
    const int a = __shfl_xor_sync(0xFFFFFFFFu, at, o);
    if (b < best || (b == best && a < at)) best = b, at = a;
  }
  if (lane == 0) codes[warp % n * kSub + warp / n] = static_cast<uint8_t>(at);
}
// VecInfer keys decoded in the folded space: row t of head h = its centroids, as fp16.
__global__ void decode_vecinfer(const uint8_t* codes, const float* books, size_t tokens, __half* rows) {
  const size_t total = kKvHeads * tokens * kSub;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t h = i / (tokens * kSub), s = i % kSub;
    const float* c = books + ((h * kSub + s) * kCentroids + codes[i]) * kDims;
    __align__(16) __half out[kDims];
    for (size_t k = 0; k < kDims; ++k) out[k] = __float2half(c[k]);
    *reinterpret_cast<uint4*>(rows + i * kDims) = *reinterpret_cast<const uint4*>(out);
  }
}
// RaBitQ keys decoded (P = I): c_j + s / sqrt(d) * (+-1 per sign bit), as fp16; one thread per
// (token, byte of signs).
__global__ void decode_rabitq(const uint8_t* records, const float* centroids, size_t tokens, __half* rows) {
  constexpr size_t bytes = kDim / 8, stride = 4 + bytes + 1;
  const size_t total = kKvHeads * tokens * bytes;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t ht = i / bytes, b = i % bytes, h = ht / tokens;
    const uint8_t* rec = records + ht * stride;
    float s;
    std::memcpy(&s, rec, 4);
    s *= rsqrtf(float(kDim));
    const float* c = centroids + (h * kNlist + rec[stride - 1]) * kDim + 8 * b;
    const unsigned bits = rec[4 + b];
    __align__(16) __half out[8];
    for (int k = 0; k < 8; ++k) out[k] = __float2half(c[k] + (bits >> k & 1 ? s : -s));
    *reinterpret_cast<uint4*>(rows + ht * kDim + 8 * b) = *reinterpret_cast<const uint4*>(out);
  }
}
// scores[h][g][t] = q_h,g . row_h,t, one thread per token, the group's queries in shared memory.
__global__ void dot_rows(const __half* rows, const float* q, size_t tokens, float* scores) {
  __shared__ float qs[kGroup * kDim];
  const size_t h = blockIdx.y;
  for (size_t i = threadIdx.x; i < kGroup * kDim; i += blockDim.x) qs[i] = q[h * kGroup * kDim + i];
  __syncthreads();
  const size_t t = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (t >= tokens) return;
  float acc[kGroup] = {};
  const uint4* row = reinterpret_cast<const uint4*>(rows + (h * tokens + t) * kDim);
  for (size_t c8 = 0; c8 < kDim / 8; ++c8) {
    const uint4 chunk = row[c8];
    const __half* v = reinterpret_cast<const __half*>(&chunk);
    for (int k = 0; k < 8; ++k) {
      const float x = __half2float(v[k]);
      for (size_t g = 0; g < kGroup; ++g) acc[g] = fmaf(qs[g * kDim + c8 * 8 + k], x, acc[g]);
    }
  }
  for (size_t g = 0; g < kGroup; ++g) scores[(h * kGroup + g) * tokens + t] = acc[g];
}

// ---- plain CommVQ: gather, then RoPE ----

// One thread per (KV head, token, channel): the centroid sum in codebook order.
__global__ void gather_sums(const uint8_t* codes, const float* books, size_t n, float* out) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < kKvHeads * n * kDim; i += size_t(gridDim.x) * blockDim.x) {
    const size_t c = i % kDim, row = i / kDim, h = row / n;
    const uint8_t* code = codes + row * kBooks;
    float sum = 0;
    for (size_t b = 0; b < kBooks; ++b) sum = __fadd_rn(sum, books[((h * kBooks + b) * kEntries + code[b]) * kDim + c]);
    out[i] = sum;
  }
}

// One thread per (row, pair): the adjacent pairs of every row rotated in place, token t of each
// KV head at position t.
__global__ void rope_in_place(float* x, size_t n, const double* inv_freq) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < kKvHeads * n * kDim / 2; i += size_t(gridDim.x) * blockDim.x) {
    const size_t pair = i % (kDim / 2), row = i / (kDim / 2);
    float* v = x + row * kDim + 2 * pair;
    vc::rope_pair(v[0], v[1], inv_freq[pair], static_cast<int64_t>(row % n));
  }
}

unsigned blocks_for(size_t n) { return static_cast<unsigned>(std::min<size_t>((n + kThreads - 1) / kThreads, 65536)); }

size_t copies_for(size_t bytes) { return std::max<size_t>(1, std::min<size_t>(8, (3 * kL2Bytes + bytes - 1) / bytes)); }

// ||a - b|| / ||b|| over device arrays of n floats.
double normalized_difference(const float* a, const float* b, size_t n) {
  std::vector<float> ha(n), hb(n);
  VQ_CUDA_CHECK(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost));
  VQ_CUDA_CHECK(cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) num += std::pow(double(ha[i]) - hb[i], 2), den += double(hb[i]) * hb[i];
  return std::sqrt(num / den);
}

struct Row {
  std::string kernel;
  size_t n;
  double fused_us, plain_us;
  size_t fused_read, fused_written, plain_read, plain_written;
  std::string check;  // the fused result against the plain one
};

Row bench_assign(size_t n, int iters) {
  const size_t x_floats = n * kDim, book_floats = kSub * kCentroids * kDims;
  const size_t copies = copies_for(x_floats * 4);
  DeviceBuffer<float> x(copies * x_floats), books(book_floats), dist(kSub * n * kCentroids);
  DeviceBuffer<uint8_t> fused(n * kSub), plain(n * kSub);
  fill_normal<<<1024, kThreads>>>(x.ptr, copies * x_floats, 1, 1.0f);
  fill_normal<<<64, kThreads>>>(books.ptr, book_floats, 2, 1.0f);
  VQ_CUDA_CHECK_LAUNCH("fill");
  const double fused_us = median_us(5, iters, [&](int i) {
    vc::vq_assign(x.ptr + i % copies * x_floats, n, kDim, books.ptr, kDims, kCentroids, fused.ptr);
  });
  const double plain_us = median_us(5, iters, [&](int i) {
    distance_tensor<<<blocks_for(kSub * n * kCentroids), kThreads>>>(x.ptr + i % copies * x_floats, n, books.ptr, dist.ptr);
    argmin_rows<<<static_cast<unsigned>((kSub * n * 32 + kThreads - 1) / kThreads), kThreads>>>(dist.ptr, n, plain.ptr);
  });
  VQ_CUDA_CHECK_LAUNCH("plain assignment");
  // Same data in both: the last timed call of each used copy (5 + iters - 1) % copies.
  std::vector<uint8_t> a(n * kSub), b(n * kSub);
  VQ_CUDA_CHECK(cudaMemcpy(a.data(), fused.ptr, a.size(), cudaMemcpyDeviceToHost));
  VQ_CUDA_CHECK(cudaMemcpy(b.data(), plain.ptr, b.size(), cudaMemcpyDeviceToHost));
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i] != b[i];
  const size_t dist_bytes = kSub * n * kCentroids * 4;
  return {"assign", n, fused_us, plain_us, x_floats * 4 + book_floats * 4, n * kSub,
          x_floats * 4 + book_floats * 4 + dist_bytes, dist_bytes + n * kSub,
          std::to_string(differing) + " of " + std::to_string(a.size()) + " codes differ"};
}

Row bench_adc(size_t n, int iters) {
  const size_t code_bytes = kKvHeads * n * kSub, book_floats = kKvHeads * kSub * kCentroids * kDims;
  const size_t q_floats = kKvHeads * kGroup * kDim, out = kKvHeads * kGroup * n;
  const size_t copies = copies_for(code_bytes);
  DeviceBuffer<uint8_t> codes(copies * code_bytes);
  DeviceBuffer<float> books(book_floats), q(q_floats), fused(out), plain(out);
  DeviceBuffer<__half> rows(kKvHeads * n * kDim);
  fill_bytes<<<1024, kThreads>>>(codes.ptr, copies * code_bytes, 3, kCentroids);
  fill_normal<<<64, kThreads>>>(books.ptr, book_floats, 4, 1.0f);
  fill_normal<<<8, kThreads>>>(q.ptr, q_floats, 5, 1.0f);
  VQ_CUDA_CHECK_LAUNCH("fill");
  const vc::ScoreShape shape{kKvHeads, kGroup, n, kDim};
  const double fused_us = median_us(5, iters, [&](int i) {
    vc::vq_adc_scores(q.ptr, books.ptr, codes.ptr + i % copies * code_bytes, kDims, kCentroids, shape, fused.ptr);
  });
  const double plain_us = median_us(5, iters, [&](int i) {
    decode_vecinfer<<<blocks_for(code_bytes), kThreads>>>(codes.ptr + i % copies * code_bytes, books.ptr, n, rows.ptr);
    dot_rows<<<dim3(static_cast<unsigned>((n + kThreads - 1) / kThreads), kKvHeads), kThreads>>>(rows.ptr, q.ptr, n, plain.ptr);
  });
  VQ_CUDA_CHECK_LAUNCH("plain ADC");
  const size_t row_bytes = kKvHeads * n * kDim * 2;
  char check[96];
  std::snprintf(check, sizeof check, "normalized difference %.1e (plain rounds keys to fp16)",
                normalized_difference(fused.ptr, plain.ptr, out));
  return {"vecinfer_adc", n, fused_us, plain_us, code_bytes + book_floats * 4 + q_floats * 4, out * 4,
          code_bytes + book_floats * 4 + row_bytes + q_floats * 4, row_bytes + out * 4, check};
}

Row bench_rabitq(size_t n, int iters) {
  const size_t stride = vc::rabitq_record_bytes(kDim), record_bytes = kKvHeads * n * stride;
  const size_t cent_floats = kKvHeads * kNlist * kDim, q_floats = kKvHeads * kGroup * kDim, out = kKvHeads * kGroup * n;
  const size_t copies = copies_for(record_bytes);
  DeviceBuffer<uint8_t> records(copies * record_bytes);
  DeviceBuffer<float> centroids(cent_floats), q(q_floats), fused(out), plain(out);
  DeviceBuffer<__half> rows(kKvHeads * n * kDim);
  for (size_t c = 0; c < copies; ++c)
    fill_records<<<1024, kThreads>>>(records.ptr + c * record_bytes, kKvHeads * n, stride, 6 + c);
  fill_normal<<<64, kThreads>>>(centroids.ptr, cent_floats, 7, 0.5f);
  fill_normal<<<8, kThreads>>>(q.ptr, q_floats, 8, 1.0f);
  VQ_CUDA_CHECK_LAUNCH("fill");
  const vc::ScoreShape shape{kKvHeads, kGroup, n, kDim};
  const double fused_us = median_us(5, iters, [&](int i) {
    vc::rabitq_scores(q.ptr, q.ptr, centroids.ptr, kNlist, records.ptr + i % copies * record_bytes, shape, fused.ptr);
  });
  const double plain_us = median_us(5, iters, [&](int i) {
    decode_rabitq<<<blocks_for(kKvHeads * n * kDim / 8), kThreads>>>(records.ptr + i % copies * record_bytes,
                                                                      centroids.ptr, n, rows.ptr);
    dot_rows<<<dim3(static_cast<unsigned>((n + kThreads - 1) / kThreads), kKvHeads), kThreads>>>(rows.ptr, q.ptr, n, plain.ptr);
  });
  VQ_CUDA_CHECK_LAUNCH("plain RaBitQ");
  const size_t row_bytes = kKvHeads * n * kDim * 2;
  char check[96];
  std::snprintf(check, sizeof check, "normalized difference %.1e (plain rounds keys to fp16)",
                normalized_difference(fused.ptr, plain.ptr, out));
  return {"rabitq", n, fused_us, plain_us, record_bytes + cent_floats * 4 + 2 * q_floats * 4, out * 4,
          record_bytes + cent_floats * 4 + row_bytes + q_floats * 4, row_bytes + out * 4, check};
}

Row bench_comm_vq(size_t n, int iters) {
  const size_t code_bytes = kKvHeads * n * kBooks, book_floats = kKvHeads * kBooks * kEntries * kDim;
  const size_t out = kKvHeads * n * kDim;
  const size_t copies = copies_for(code_bytes);
  DeviceBuffer<uint8_t> codes(copies * code_bytes);
  DeviceBuffer<float> books(book_floats), fused(out), plain(out);
  DeviceBuffer<int64_t> positions(n);
  DeviceBuffer<double> inv_freq(kDim / 2);
  fill_bytes<<<1024, kThreads>>>(codes.ptr, copies * code_bytes, 9, kEntries);
  fill_normal<<<64, kThreads>>>(books.ptr, book_floats, 10, 0.5f);
  VQ_CUDA_CHECK_LAUNCH("fill");
  std::vector<int64_t> pos(n);
  for (size_t t = 0; t < n; ++t) pos[t] = static_cast<int64_t>(t);
  VQ_CUDA_CHECK(cudaMemcpy(positions.ptr, pos.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
  veloxquant::RopeParams rope;
  rope.dims = kDim;
  std::vector<double> freq(kDim / 2);
  for (size_t i = 0; i < kDim / 2; ++i) freq[i] = std::pow(10000.0, -2.0 * static_cast<double>(i) / kDim);
  VQ_CUDA_CHECK(cudaMemcpy(inv_freq.ptr, freq.data(), freq.size() * sizeof(double), cudaMemcpyHostToDevice));
  const double fused_us = median_us(5, iters, [&](int i) {
    vc::comm_vq_gather_rope(codes.ptr + i % copies * code_bytes, books.ptr, kBooks, kEntries, positions.ptr, rope,
                            kKvHeads, n, kDim, fused.ptr);
  });
  const double plain_us = median_us(5, iters, [&](int i) {
    gather_sums<<<blocks_for(out), kThreads>>>(codes.ptr + i % copies * code_bytes, books.ptr, n, plain.ptr);
    rope_in_place<<<blocks_for(out / 2), kThreads>>>(plain.ptr, n, inv_freq.ptr);
  });
  VQ_CUDA_CHECK_LAUNCH("plain CommVQ");
  char check[96];
  std::snprintf(check, sizeof check, "normalized difference %.1e", normalized_difference(fused.ptr, plain.ptr, out));
  return {"comm_vq_gather_rope", n, fused_us, plain_us, code_bytes + book_floats * 4 + n * 8, out * 4,
          code_bytes + book_floats * 4 + out * 4, 2 * out * 4, check};
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir;
  int iters = 50;
  if (!vc::bench::parse_out_and_iters(argc, argv, out_dir, iters)) return 2;
  std::vector<Row> rows;
  cudaDeviceProp prop{};
  try {
    VQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    for (size_t n : {size_t{4096}, size_t{32768}, size_t{131072}}) {
      rows.push_back(bench_assign(n, iters));
      rows.push_back(bench_adc(n, iters));
      rows.push_back(bench_rabitq(n, iters));
      rows.push_back(bench_comm_vq(n, iters));
      for (size_t r = rows.size() - 4; r < rows.size(); ++r)
        std::printf("%-13s N=%-6zu fused %9.1f us  plain %9.1f us  %5.2fx  %s\n", rows[r].kernel.c_str(), n,
                    rows[r].fused_us, rows[r].plain_us, rows[r].plain_us / rows[r].fused_us, rows[r].check.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "veloxquant_cuda_vq_bench: %s\n", e.what());
    return 1;
  }
  const std::string date = vc::bench::utc_now();
  const vc::bench::ResultFiles files(out_dir, "cuda_vq", "veloxquant_cuda_vq_bench");
  if (!files.ok()) return 2;
  FILE* json = files.json;
  FILE* md = files.md;
  std::fprintf(json, "{\n  \"command\": \"veloxquant_cuda_vq_bench --out OUT_DIR (a step of bench/cuda/run_h200.sh)\",\n  \"gpu\": \"%s\",\n  \"date\": \"%s\",\n"
               "  \"iters\": %d,\n  \"shape\": {\"head_dim\": %zu, \"kv_heads\": %zu, \"group\": %zu, \"dims\": %zu, "
               "\"centroids\": %zu, \"nlist\": %zu},\n  \"rows\": [\n", prop.name, date.c_str(), iters, kDim, kKvHeads, kGroup,
               kDims, kCentroids, kNlist);
  std::fprintf(md, "# CUDA vector-quantization kernels against plain implementations\n\n"
               "`veloxquant_cuda_vq_bench --out OUT_DIR` (a step of `bench/cuda/run_h200.sh`), %s, %s. head_dim %zu; assignment: N rows, "
               "%zu-dim sub-vectors, %zu centroids; scores: %zu KV heads x %zu query heads, N tokens (VecInfer %zu-dim "
               "sub-vectors, %zu centroids; RaBitQ nlist %zu); CommVQ keys: %zu KV heads x N tokens, %zu codebooks of %zu "
               "centroids, RoPE at positions 0..N-1. Median of %d calls (CUDA events, after warm-up), "
               "inputs from HBM. GB/s on the bytes each path reads (the plain paths' intermediate included).\n\n"
               "| kernel | N | fused µs | fused GB/s | plain µs | plain GB/s | speed-up | fused read / written MB | "
               "plain read / written MB | fused vs plain |\n"
               "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
               prop.name, date.c_str(), kDim, kDims, kCentroids, kKvHeads, kGroup, kDims, kCentroids, kNlist, kKvHeads, kBooks,
               kEntries, iters);
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& w = rows[r];
    std::fprintf(json, "    {\"kernel\": \"%s\", \"n\": %zu, \"fused_us\": %.2f, \"plain_us\": %.2f, \"speedup\": %.3f, "
                 "\"fused_read_bytes\": %zu, \"fused_written_bytes\": %zu, \"plain_read_bytes\": %zu, "
                 "\"plain_written_bytes\": %zu, \"fused_gbps\": %.1f, \"plain_gbps\": %.1f, \"check\": \"%s\"}%s\n",
                 w.kernel.c_str(), w.n, w.fused_us, w.plain_us, w.plain_us / w.fused_us, w.fused_read, w.fused_written,
                 w.plain_read, w.plain_written, w.fused_read / w.fused_us / 1e3, w.plain_read / w.plain_us / 1e3,
                 w.check.c_str(), r + 1 < rows.size() ? "," : "");
    std::fprintf(md, "| %s | %zu | %.1f | %.0f | %.1f | %.0f | %.2fx | %.1f / %.1f | %.1f / %.1f | %s |\n", w.kernel.c_str(),
                 w.n, w.fused_us, w.fused_read / w.fused_us / 1e3, w.plain_us, w.plain_read / w.plain_us / 1e3,
                 w.plain_us / w.fused_us, w.fused_read / 1e6, w.fused_written / 1e6, w.plain_read / 1e6,
                 w.plain_written / 1e6, w.check.c_str());
  }
  std::fprintf(json, "  ]\n}\n");
  return 0;
}
