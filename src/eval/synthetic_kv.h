// A synthetic KV workload with the features real caches have, so codecs can be compared without
// a model: a few outlier key channels with large magnitude and offset, heavy-tailed values
// (Student-t, 3 degrees of freedom), and an attention-sink token 0 whose key lines up with the
// queries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "veloxquant/method.h"

namespace veloxquant {

struct SyntheticKV {
  size_t tokens = 0, kv_heads = 0, head_dim = 0, q_tokens = 0, q_heads = 0;
  std::vector<float> keys, values;  // [tokens, kv_heads, head_dim]
  std::vector<float> queries;       // [q_tokens, q_heads, head_dim], the last q_tokens positions
};

SyntheticKV make_synthetic_kv(size_t tokens, size_t kv_heads, size_t head_dim, size_t q_per_kv,
                              size_t q_tokens, uint64_t seed);

// Exact causal attention in double precision on uncompressed f32 data (same conventions as
// KVCache::attend): the ground truth that compressed attention is measured against.
// `shape` with, for a calibrated spec that names no artifacts (veloxquant/calibration.h), a
// calibration fitted to 2048 tokens of the synthetic workload drawn with `seed`, so that synthetic
// benchmarks and tests build every method; else `shape` unchanged. A workload's channel
// statistics come from its seed (another seed is another "model"): given the seed of the
// workload it measures, the tables fit that workload's statistics, and its tokens, in sample.
LayerShape with_synthetic_calibration(const Spec& spec, LayerShape shape, uint64_t seed = 0x5eed);

std::vector<float> exact_attention(const float* q, size_t nq, size_t q_heads, const float* k,
                                   const float* v, size_t tokens, size_t kv_heads, size_t head_dim);

}  // namespace veloxquant
