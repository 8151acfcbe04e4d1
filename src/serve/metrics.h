// The server's counters, gauges and latency histograms, rendered as Prometheus text (/metrics).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace veloxquant::serve {

// A latency histogram with Prometheus's cumulative buckets, in seconds.
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                  0.25,  0.5,    1,     2.5,  5,     10,   30};
  void observe(double seconds);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::array<uint64_t, kBounds.size()> counts_{};  // per bucket, not cumulative
  uint64_t count_ = 0;
  double sum_ = 0;
};

// What the scheduler sets after every step.
struct Gauges {
  size_t running = 0, queued = 0;
  size_t pages_total = 0, pages_free = 0, page_bytes = 0;
  size_t pages_used_peak = 0;                   // the most pages in use at once since the start
  double fixed_bytes = 0, bytes_per_token = 0;  // the spec's measured line (KvByteModel)
  size_t kv_bytes_stored = 0;  // what the running sequences' caches store now (Session::kv_bytes)
};

class Metrics {
 public:
  void count_request(int status);
  void count_tokens(size_t prompt, size_t generated);
  void count_preemption();
  void observe_first_token(double seconds);
  void observe_inter_token(double seconds);
  void set(const Gauges& gauges);
  Gauges gauges() const;
  std::string prometheus() const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> requests_;  // by HTTP status
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, preemptions_ = 0;
  Histogram first_token_, inter_token_;
  Gauges gauges_;
};

}  // namespace veloxquant::serve
