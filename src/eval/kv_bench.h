// One method on the synthetic KV workload: memory, reconstruction and attention error, speed.
#pragma once

#include <cstdint>
#include <string>

namespace veloxquant {

struct KVBenchOptions {
  size_t tokens = 4096;
  size_t kv_heads = 4;
  size_t head_dim = 128;
  size_t q_per_kv = 4;      // grouped-query attention: query heads per KV head
  size_t q_tokens = 8;      // queries at the last positions, causal
  size_t append_chunk = 256;  // tokens per append() call, as a prefill would hand them over
  uint64_t seed = 0;
};

struct KVBenchResult {
  std::string method, spec;
  size_t fp16_bytes = 0, k_bytes = 0, v_bytes = 0;
  double compression_ratio = 0;  // fp16 bytes / stored bytes
  double key_mse = 0, key_cosine = 0, value_mse = 0, attn_rel_err = 0;
  double encode_tokens_per_s = 0;  // tokens appended (all KV heads, K and V) per second
  double attend_tokens_per_s = 0;  // cached tokens attended per second by one decode query
};

// Throws SpecError / ShapeError on a bad spec or workload.
KVBenchResult run_kv_bench(const std::string& spec, const KVBenchOptions& opt);

}  // namespace veloxquant
