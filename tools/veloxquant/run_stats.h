// What the runtime commands share: thread count, peak memory, reading the text, progress,
// byte and ratio formatting.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "veloxquant/error.h"
#include "veloxquant/model.h"
#include "veloxquant/threads.h"

namespace veloxquant::cli {

// "--threads N": threads for the matrix products and attention; by default the CPUs this process
// may run on (veloxquant/threads.h).
inline void add_threads_option(CLI::App* cmd, int& threads) {
  threads = default_threads();
  cmd->add_option("-t,--threads", threads, "CPU threads")->capture_default_str()->check(CLI::Range(1, 1024));
}

// --device cpu|cuda and --gpu-weights f16|f32 (the CUDA backend: docs/cuda.md).
inline void add_device_options(CLI::App* cmd, Device& device, GpuWeights& weights) {
  // The library's parse errors become usage errors, reported as CLI11 reports its own.
  const auto parsed = [](const char* option, auto parse) {
    return [option, parse](const std::string& name) {
      try {
        parse(name);
      } catch (const Error& e) {
        throw CLI::ValidationError(option, e.what());
      }
    };
  };
  cmd->add_option_function<std::string>(
         "--device", parsed("--device", [&device](const std::string& n) { device = parse_device(n); }),
         cuda_built() ? "where the model and caches run: cpu or cuda (methods with CUDA kernels)"
                      : "where the model and caches run: cpu (this build has no CUDA backend)")
      ->default_str("cpu");
  cmd->add_option_function<std::string>(
         "--gpu-weights", parsed("--gpu-weights", [&weights](const std::string& n) { weights = parse_gpu_weights(n); }),
         "with --device cuda: weights and projection inputs in f16, or f32 as the CPU computes")
      ->default_str("f16");
}

inline void write_text(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  out.close();
  if (!out) throw Error("cannot write '" + path + "'");
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the text file '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Progress on stderr: one line redrawn in place on a terminal ("[=====>    ] 12/40 chunks
// PPL 9.87", `what` being "chunks  PPL 9.87"); into a file or pipe, a line at every tenth of the
// work.
inline void show_progress(size_t done, size_t total, const std::string& what) {
  const bool tty = isatty(STDERR_FILENO);
  if (!tty && done != total && done * 10 / total == (done - 1) * 10 / total) return;
  constexpr size_t kWidth = 30;
  const size_t filled = done * kWidth / total;
  std::string bar(kWidth, ' ');
  std::fill_n(bar.begin(), filled, '=');
  if (filled < kWidth) bar[filled] = '>';
  fmt::print(stderr, "{}[{}] {}/{} {}{}", tty ? "\r" : "", bar, done, total, what,
             tty && done < total ? "" : "\n");
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
