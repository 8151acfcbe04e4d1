// The machine's memory bandwidth, the yardstick of long-context decode (bench/long_context.py):
// STREAM's triad a[i] = b[i] + s * c[i] (24 bytes per element, as STREAM counts them) and a
// read-only sum (8 bytes per element, closer to decode, which only reads the cache), each on 1..N
// threads over arrays far larger than the last-level cache. Best of --reps, as STREAM reports.
// Prints one JSON object per thread count.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Runs fn(begin, end) on `threads` threads over [0, n) in equal slices; returns the seconds taken.
template <typename Fn>
double timed_slices(size_t n, int threads, Fn fn) {
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    const size_t begin = n * t / threads;
    const size_t end = n * (t + 1) / threads;
    pool.emplace_back([=] { fn(t, begin, end); });
  }
  for (auto& thread : pool) thread.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Memory bandwidth: STREAM triad and a read-only sum"};
  size_t mib = 512;
  int max_threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  int reps = 10;
  app.add_option("--mib", mib, "size of each array in MiB (far above the last-level cache)")
      ->check(CLI::Range(16, 8192));
  app.add_option("-t,--threads", max_threads, "measure 1 to this many threads")->check(CLI::Range(1, 1024));
  app.add_option("-r,--reps", reps, "repetitions; the best is reported")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  const size_t n = mib * 1024 * 1024 / sizeof(double);
  std::vector<double> a(n), b(n), c(n);
  std::vector<double> sums(static_cast<size_t>(max_threads) * 8);  // a cache line per thread
  for (int threads = 1; threads <= max_threads; ++threads) {
    // Each thread touches its own slice first, so its pages are mapped before timing.
    timed_slices(n, threads, [&](int, size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) a[i] = 0.0, b[i] = 1.0, c[i] = 2.0;
    });
    double best_triad = 1e30;
    double best_read = 1e30;
    for (int rep = 0; rep < reps; ++rep) {
      best_triad = std::min(best_triad, timed_slices(n, threads, [&](int, size_t begin, size_t end) {
                              for (size_t i = begin; i < end; ++i) a[i] = b[i] + 3.0 * c[i];
                            }));
      best_read = std::min(best_read, timed_slices(n, threads, [&](int t, size_t begin, size_t end) {
                             // Four independent sums, so the adds do not serialise on one register.
                             double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                             size_t i = begin;
                             for (; i + 4 <= end; i += 4)
                               s0 += b[i], s1 += b[i + 1], s2 += b[i + 2], s3 += b[i + 3];
                             for (; i < end; ++i) s0 += b[i];
                             sums[static_cast<size_t>(t) * 8] = s0 + s1 + s2 + s3;
                           }));
    }
    nlohmann::json row = {{"threads", threads},
                          {"array_mib", mib},
                          {"reps", reps},
                          {"triad_gb_per_s", 24.0 * static_cast<double>(n) / best_triad / 1e9},
                          {"read_gb_per_s", 8.0 * static_cast<double>(n) / best_read / 1e9},
                          {"checksum", sums[0] + a[n / 2]}};
    std::printf("%s\n", row.dump().c_str());
  }
  return 0;
}
