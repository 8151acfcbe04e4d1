// parallel_for: every index runs exactly once, on several threads when asked, and the first
// exception thrown inside the loop reaches the caller. Run under ThreadSanitizer in CI (.ci/run).
#include "core/parallel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "expect_error.h"

namespace veloxquant {
namespace {

TEST(ParallelFor, RunsEveryIndexOnceAcrossThreads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(4);
  std::vector<int> hits(200, 0);
  std::vector<int> thread_of(hits.size(), -1);
  parallel_for(hits.size(), [&](size_t i) {
    ++hits[i];  // each index is one task: no two threads touch one slot
    thread_of[i] = omp_get_thread_num();
    // Long enough that the first thread cannot take every index before the others start.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  omp_set_num_threads(saved);
  for (int h : hits) ASSERT_EQ(h, 1);
  bool several = false;
  for (int t : thread_of) several = several || t != thread_of[0];
  EXPECT_TRUE(several || omp_get_num_procs() == 1);
}

TEST(ParallelFor, SerialWhenAskedRunsOnTheCallingThread) {
  std::vector<int> thread_of(64, -1);
  parallel_for(thread_of.size(), [&](size_t i) { thread_of[i] = omp_get_thread_num(); }, false);
  for (int t : thread_of) EXPECT_EQ(t, 0);
}

TEST(ParallelFor, CarriesTheExceptionToTheCaller) {
  std::atomic<int> ran{0};
  const std::string msg = test::error_message<std::runtime_error>([&] {
    parallel_for(200, [&](size_t i) {
      ++ran;
      if (i % 50 == 7) throw std::runtime_error("index " + std::to_string(i) + " failed");
    });
  });
  EXPECT_CONTAINS(msg, "failed");
  EXPECT_EQ(ran.load(), 200);  // the other indices still ran
}

}  // namespace
}  // namespace veloxquant
