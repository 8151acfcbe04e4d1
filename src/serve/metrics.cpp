#include "serve/metrics.h"

#include <fmt/format.h>

namespace veloxquant::serve {

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  if (i < kBounds.size()) ++counts_[i];
  ++count_;
  sum_ += seconds;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name,
                     count_);
}

void Metrics::count_request(int status) {
  std::lock_guard lock(mutex_);
  ++requests_[status];
}

void Metrics::count_tokens(size_t prompt, size_t generated) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}

void Metrics::count_preemption() {
  std::lock_guard lock(mutex_);
  ++preemptions_;
}

void Metrics::observe_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  first_token_.observe(seconds);
}

void Metrics::observe_inter_token(double seconds) {
  std::lock_guard lock(mutex_);
  inter_token_.observe(seconds);
}

void Metrics::set(const Gauges& gauges) {
  std::lock_guard lock(mutex_);
  gauges_ = gauges;
}

Gauges Metrics::gauges() const {
  std::lock_guard lock(mutex_);
  return gauges_;
}

std::string Metrics::prometheus() const {
  std::lock_guard lock(mutex_);
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  out += "# HELP veloxquant_requests_total Requests answered, by HTTP status.\n"
         "# TYPE veloxquant_requests_total counter\n";
  for (const auto& [status, n] : requests_)
    out += fmt::format("veloxquant_requests_total{{status=\"{}\"}} {}\n", status, n);
  metric("veloxquant_prompt_tokens_total", "counter", "Prompt tokens evaluated.", prompt_tokens_);
  metric("veloxquant_generated_tokens_total", "counter", "Tokens generated.", generated_tokens_);
  metric("veloxquant_preemptions_total", "counter",
         "Sequences preempted for lack of KV pages (recomputed later).", preemptions_);
  metric("veloxquant_running_sequences", "gauge", "Sequences in the running batch.", gauges_.running);
  metric("veloxquant_queue_length", "gauge", "Requests waiting for admission.", gauges_.queued);
  metric("veloxquant_kv_pages_total", "gauge", "KV pages of the pool.", gauges_.pages_total);
  metric("veloxquant_kv_pages_free", "gauge", "KV pages free.", gauges_.pages_free);
  metric("veloxquant_kv_page_bytes", "gauge", "Bytes of one KV page.", gauges_.page_bytes);
  metric("veloxquant_kv_pages_used_peak", "gauge", "The most KV pages in use at once since the start.",
         gauges_.pages_used_peak);
  metric("veloxquant_kv_fixed_bytes", "gauge",
         "Bytes a sequence's caches take whatever its length (measured at start).", gauges_.fixed_bytes);
  metric("veloxquant_kv_bytes_per_token", "gauge",
         "Bytes a sequence's caches take per token (measured at start).", gauges_.bytes_per_token);
  metric("veloxquant_kv_bytes_in_use", "gauge", "Bytes of the KV pages the running sequences hold.",
         (gauges_.pages_total - gauges_.pages_free) * gauges_.page_bytes);
  metric("veloxquant_kv_bytes_stored", "gauge", "Bytes the running sequences' caches store now.",
         gauges_.kv_bytes_stored);
  first_token_.render(out, "veloxquant_time_to_first_token_seconds",
                      "From arrival to the first generated token.");
  inter_token_.render(out, "veloxquant_inter_token_seconds", "Between consecutive tokens of one sequence.");
  return out;
}

}  // namespace veloxquant::serve
