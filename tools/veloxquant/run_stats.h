// What the runtime commands share: thread count, peak memory, byte and ratio formatting.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <string>

#include <omp.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace veloxquant::cli {

// "--threads N": OpenMP threads for the matrix products and attention.
inline void add_threads_option(CLI::App* cmd, int& threads) {
  threads = omp_get_num_procs();
  cmd->add_option("-t,--threads", threads, "CPU threads")->capture_default_str()->check(CLI::Range(1, 1024));
}

inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// "1,234,567"
inline std::string grouped(size_t n) {
  const std::string digits = std::to_string(n);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

inline std::string kv_summary(size_t stored, size_t fp16) {
  return fmt::format("{} B stored vs {} B at fp16 ({:.2f}x compression)", grouped(stored), grouped(fp16),
                     stored ? static_cast<double>(fp16) / static_cast<double>(stored) : 0.0);
}

}  // namespace veloxquant::cli
