// The server's KV memory, in pages: a sequence's caches grow a page at a time, and a request is
// admitted only when the pages its caches will take fit in what is left of --kv-memory.
#pragma once

#include <cstddef>

#include "veloxquant/model.h"

namespace veloxquant::serve {

// What a sequence's caches of one spec store for t tokens, as a line above every measured point:
// fixed + per_token * t. `fixed` covers what does not scale with t (residual fp16 windows, codec
// state), `per_token` is the steady rate; an evicting cache's plateau shows as per_token 0.
struct KvByteModel {
  double fixed = 0, per_token = 0;
  double fastest = 0;  // the most bytes per token between two measured points (from 0 tokens)
  size_t bytes(size_t tokens) const;
};

// Measures the model by appending random keys and values to one layer's caches of `spec` (every
// layer of the model is assumed to store as much as layer 0, which no layer exceeds) at doubling
// token counts up to `up_to`, and scales by the layer count.
KvByteModel measure_kv_bytes(const Model& model, const std::string& spec, size_t up_to = 2048);

// Pages of `page_tokens` tokens' worth of bytes (at the steady rate, or at the fastest one for a
// cache whose bytes level off, such as an evicting one) out of a fixed budget. Sequences hold
// pages_for(tokens) pages; take() and give() move them, and nothing is ever given twice.
class PagePool {
 public:
  PagePool(KvByteModel model, size_t budget_bytes, size_t page_tokens);
  // The pages a sequence of `tokens` tokens needs: its bytes in page_bytes() units, rounded up.
  size_t pages_for(size_t tokens) const;
  size_t page_bytes() const { return page_bytes_; }
  size_t total() const { return total_; }
  size_t free() const { return free_; }
  size_t used() const { return total_ - free_; }
  // Takes n pages if that many are free; false (nothing taken) otherwise.
  bool take(size_t n);
  void give(size_t n);
  const KvByteModel& byte_model() const { return model_; }
  size_t page_tokens() const { return page_tokens_; }

 private:
  KvByteModel model_;
  size_t page_tokens_, page_bytes_, total_, free_;
};

}  // namespace veloxquant::serve
