// DeviceSampler (veloxquant/cuda_sampler.h). Each call: copy the rows into sort keys (-0 as +0, so
// that equal logits sort by id as the host's comparison sees them), apply each row's repetition
// penalty, then an argmax per greedy row, or for sampled rows a stable descending radix sort of
// (logit, id) — ids start ascending, so ties keep the lower id first, as Sampler::pick orders them
// — and one block per row that scans the kept candidates in that order with the host's double
// arithmetic. Sums run as block reductions rather than the host's left-to-right loop, so a
// threshold can only land elsewhere when the draw or top_p falls within rounding (about 1e-16) of
// a cumulative sum.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <string>

#include "cuda/common/check.cuh"
#include "cuda/common/device_array.cuh"
#include "veloxquant/cuda_sampler.h"

namespace veloxquant::cuda {
namespace {

constexpr int kThreads = 256;

// One row's plan on the device.
struct RowPlan {
  double uniform = 0;
  float temperature = 0, top_p = 1, penalty = 1;
  int keep = 0;                     // candidates after top-k
  int penalized_begin = 0, penalized_end = 0;  // into the penalized ids
};

__global__ void copy_keys(const float* logits, size_t stride, int vocab, float* keys, int32_t* ids) {
  const int r = blockIdx.y;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab; i += gridDim.x * blockDim.x) {
    const float l = logits[r * stride + i];
    keys[static_cast<size_t>(r) * vocab + i] = l == 0.0f ? 0.0f : l;
    ids[static_cast<size_t>(r) * vocab + i] = i;
  }
}

// The CTRL penalty as the host applies it: a row's penalized ids are distinct, so no two threads
// touch one logit.
__global__ void apply_penalty(const RowPlan* plans, const int32_t* penalized, int vocab, float* keys) {
  const RowPlan p = plans[blockIdx.x];
  for (int j = p.penalized_begin + threadIdx.x; j < p.penalized_end; j += blockDim.x) {
    const int32_t t = penalized[j];
    if (t < 0 || t >= vocab) continue;
    float& l = keys[static_cast<size_t>(blockIdx.x) * vocab + t];
    l = l > 0 ? l / p.penalty : l * p.penalty;
  }
}

struct Best {
  float logit;
  int32_t id;
};
struct HigherLogitLowerId {
  __device__ Best operator()(const Best& a, const Best& b) const {
    return (a.logit > b.logit || (a.logit == b.logit && a.id < b.id)) ? a : b;
  }
};

__global__ void argmax_rows(const RowPlan* plans, const float* keys, int vocab, int32_t* out) {
  const int r = blockIdx.x;
  if (plans[r].temperature != 0.0f) return;
  const float* row = keys + static_cast<size_t>(r) * vocab;
  Best best{-INFINITY, vocab};
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) best = HigherLogitLowerId{}(best, Best{row[i], i});
  using Reduce = cub::BlockReduce<Best, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const Best b = Reduce(storage).Reduce(best, HigherLogitLowerId{});
  // A row of NaN only: the host's comparison keeps the first id.
  if (threadIdx.x == 0) out[r] = b.id < vocab ? b.id : 0;
}

// Sum over i < count of term(i), on every thread of the block.
template <class Term>
__device__ double block_sum(int count, Term term) {
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  __shared__ double total;
  double s = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += term(i);
  const double t = Reduce(storage).Sum(s);
  if (threadIdx.x == 0) total = t;
  __syncthreads();
  const double result = total;
  __syncthreads();
  return result;
}

// The first i < count whose running sum term(0) + ... + term(i) reaches `threshold` (>= when
// inclusive, > otherwise), in order; count when none does. On every thread of the block.
template <class Term>
__device__ int first_reaching(int count, Term term, double threshold, bool inclusive) {
  using Scan = cub::BlockScan<double, kThreads>;
  __shared__ typename Scan::TempStorage storage;
  __shared__ int found;
  __shared__ double carry;
  if (threadIdx.x == 0) found = count, carry = 0;
  __syncthreads();
  for (int base = 0; base < count; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const double v = i < count ? term(i) : 0.0;
    double prefix = 0, chunk = 0;
    Scan(storage).InclusiveSum(v, prefix, chunk);
    prefix += carry;
    const bool reached = i < count && (inclusive ? prefix >= threshold : prefix > threshold);
    if (reached) atomicMin(&found, i);
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk;
    __syncthreads();
    if (found < count) break;
  }
  return found;
}

// Sampler::pick's steps after the sort, for one sampled row per block.
__global__ void pick_sorted(const RowPlan* plans, const float* sorted, const int32_t* sorted_ids, int vocab,
                            int32_t* out) {
  const RowPlan p = plans[blockIdx.x];
  if (p.temperature == 0.0f) return;
  const float* l = sorted + static_cast<size_t>(blockIdx.x) * vocab;
  const float top = l[0];
  int n = p.keep;
  if (p.top_p < 1.0f) {
    const auto mass = [&](int i) { return exp(static_cast<double>(l[i] - top)); };
    const double z = block_sum(n, mass);
    const int last = first_reaching(n, [&](int i) { return mass(i) / z; }, static_cast<double>(p.top_p), true);
    n = last < n ? last + 1 : n;
  }
  const auto weight = [&](int i) { return exp(static_cast<double>(l[i] - top) / p.temperature); };
  const double target = p.uniform * block_sum(n, weight);
  const int chosen = first_reaching(n, weight, target, false);
  if (threadIdx.x == 0) out[blockIdx.x] = sorted_ids[static_cast<size_t>(blockIdx.x) * vocab + (chosen < n ? chosen : n - 1)];
}

}  // namespace

struct DeviceSampler::Impl {
  size_t vocab, max_rows, sort_bytes;
  DeviceArray<float> keys, sorted;
  DeviceArray<int32_t> ids, sorted_ids, tokens, penalized;
  DeviceArray<RowPlan> plans;
  DeviceArray<uint8_t> sort_storage;

  static size_t sort_storage_bytes(size_t vocab) {
    size_t bytes = 0;
    VQ_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, static_cast<const float*>(nullptr),
                                                            static_cast<float*>(nullptr),
                                                            static_cast<const int32_t*>(nullptr),
                                                            static_cast<int32_t*>(nullptr), static_cast<int>(vocab)));
    return bytes;
  }

  Impl(size_t v, size_t rows)
      : vocab(v), max_rows(rows), sort_bytes(sort_storage_bytes(v)), keys(v * rows), sorted(v * rows),
        ids(v * rows), sorted_ids(v * rows), tokens(rows), plans(rows), sort_storage(sort_bytes) {}

  void check_rows(size_t rows) const {
    if (rows == 0 || rows > max_rows) {
      throw Error("device sampler got " + std::to_string(rows) + " rows; expected 1.." + std::to_string(max_rows));
    }
  }
};

DeviceSampler::DeviceSampler(size_t vocab, size_t max_rows) {
  if (vocab == 0 || max_rows == 0 || vocab > static_cast<size_t>(INT32_MAX)) {
    throw Error("device sampler for " + std::to_string(max_rows) + " rows of " + std::to_string(vocab) +
                " logits; expected at least 1 row and 1..2^31-1 logits");
  }
  impl_ = std::make_unique<Impl>(vocab, max_rows);
}

DeviceSampler::~DeviceSampler() = default;

std::vector<int32_t> DeviceSampler::sample(const float* logits, size_t row_stride,
                                           std::span<const SampleRequest> requests, void* stream_ptr) {
  Impl& m = *impl_;
  const size_t rows = requests.size();
  m.check_rows(rows);
  std::vector<RowPlan> plans(rows);
  std::vector<int32_t> penalized;
  bool any_sampled = false;
  for (size_t r = 0; r < rows; ++r) {
    const SampleRequest& q = requests[r];
    try {
      check_sampler_options(q.options);
      if (!(q.uniform >= 0.0 && q.uniform < 1.0))
        throw Error("uniform " + std::to_string(q.uniform) + " is invalid; expected 0 <= uniform < 1");
    } catch (const Error& e) {
      throw Error("device sampler row " + std::to_string(r) + ": " + e.what());
    }
    RowPlan& p = plans[r];
    p.uniform = q.uniform, p.temperature = q.options.temperature, p.top_p = q.options.top_p;
    p.penalty = q.options.repeat_penalty;
    p.keep = static_cast<int>(q.options.top_k > 0 ? std::min<size_t>(q.options.top_k, m.vocab) : m.vocab);
    p.penalized_begin = static_cast<int>(penalized.size());
    if (p.penalty != 1.0f) penalized.insert(penalized.end(), q.penalized.begin(), q.penalized.end());
    p.penalized_end = static_cast<int>(penalized.size());
    any_sampled = any_sampled || p.temperature != 0.0f;
  }
  if (penalized.size() > m.penalized.size) m.penalized = DeviceArray<int32_t>(penalized.size());
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  const int vocab = static_cast<int>(m.vocab), n = static_cast<int>(rows);
  VQ_CUDA_CHECK(cudaMemcpyAsync(m.plans.ptr, plans.data(), rows * sizeof(RowPlan), cudaMemcpyHostToDevice, stream));
  if (!penalized.empty()) {
    VQ_CUDA_CHECK(cudaMemcpyAsync(m.penalized.ptr, penalized.data(), penalized.size() * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, stream));
  }
  copy_keys<<<dim3((vocab + kThreads - 1) / kThreads, n), kThreads, 0, stream>>>(logits, row_stride, vocab, m.keys.ptr,
                                                                                   m.ids.ptr);
  VQ_CUDA_CHECK_LAUNCH("copy_keys");
  apply_penalty<<<n, kThreads, 0, stream>>>(m.plans.ptr, m.penalized.ptr, vocab, m.keys.ptr);
  VQ_CUDA_CHECK_LAUNCH("apply_penalty");
  argmax_rows<<<n, kThreads, 0, stream>>>(m.plans.ptr, m.keys.ptr, vocab, m.tokens.ptr);
  VQ_CUDA_CHECK_LAUNCH("argmax_rows");
  if (any_sampled) {
    for (size_t r = 0; r < rows; ++r) {
      if (plans[r].temperature == 0.0f) continue;
      const size_t at = r * m.vocab;
      size_t bytes = m.sort_bytes;
      VQ_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(m.sort_storage.ptr, bytes, m.keys.ptr + at,
                                                              m.sorted.ptr + at, m.ids.ptr + at, m.sorted_ids.ptr + at,
                                                              vocab, 0, 32, stream));
    }
    pick_sorted<<<n, kThreads, 0, stream>>>(m.plans.ptr, m.sorted.ptr, m.sorted_ids.ptr, vocab, m.tokens.ptr);
    VQ_CUDA_CHECK_LAUNCH("pick_sorted");
  }
  std::vector<int32_t> out(rows);
  VQ_CUDA_CHECK(cudaMemcpyAsync(out.data(), m.tokens.ptr, rows * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  VQ_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

std::vector<int32_t> DeviceSampler::sample_host(std::span<const float> logits, std::span<const SampleRequest> requests) {
  Impl& m = *impl_;
  if (logits.size() != requests.size() * m.vocab) {
    throw Error("device sampler got " + std::to_string(logits.size()) + " logits for " + std::to_string(requests.size()) +
                " rows; expected " + std::to_string(m.vocab) + " per row");
  }
  m.check_rows(requests.size());
  const DeviceArray<float> device(logits.data(), logits.size());
  return sample(device.ptr, m.vocab, requests);
}

}  // namespace veloxquant::cuda
