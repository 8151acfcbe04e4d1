// parallel_for on the thread pool: every index runs exactly once, on several threads when asked,
// nested and concurrent loops stay correct, and the first exception thrown inside the loop reaches
// the caller. Run under ThreadSanitizer in CI (.ci/run).
#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "expect_error.h"
#include "veloxquant/error.h"
#include "veloxquant/threads.h"

namespace veloxquant {
namespace {

// Sets the pool's thread count for one test and restores it after.
class PoolThreads {
 public:
  explicit PoolThreads(int n) : saved_(threads()) { set_threads(n); }
  ~PoolThreads() { set_threads(saved_); }

 private:
  int saved_;
};

TEST(ParallelFor, RunsEveryIndexOnceAcrossThreads) {
  PoolThreads pool(4);
  std::vector<int> hits(200, 0);
  std::vector<std::thread::id> thread_of(hits.size());
  parallel_for(hits.size(), [&](size_t i) {
    ++hits[i];  // each index is one item: no two threads touch one slot
    thread_of[i] = std::this_thread::get_id();
    // Long enough that the first thread cannot take every index before the others wake.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  const std::set<std::thread::id> distinct(thread_of.begin(), thread_of.end());
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_LE(distinct.size(), 4u);
}

TEST(ParallelFor, SerialWhenAskedRunsOnTheCallingThread) {
  PoolThreads pool(4);
  std::vector<std::thread::id> thread_of(64);
  parallel_for(thread_of.size(), [&](size_t i) { thread_of[i] = std::this_thread::get_id(); }, false);
  for (const auto& t : thread_of) EXPECT_EQ(t, std::this_thread::get_id());
}

TEST(ParallelFor, OneThreadRunsEverythingOnTheCaller) {
  PoolThreads pool(1);
  EXPECT_EQ(threads(), 1);
  std::vector<std::thread::id> thread_of(64);
  parallel_for(thread_of.size(), [&](size_t i) { thread_of[i] = std::this_thread::get_id(); });
  for (const auto& t : thread_of) EXPECT_EQ(t, std::this_thread::get_id());
}

TEST(ParallelFor, NestedLoopRunsSeriallyInsideTheItem) {
  PoolThreads pool(4);
  std::vector<std::atomic<int>> hits(16 * 16);
  parallel_for(16, [&](size_t i) {
    EXPECT_TRUE(in_parallel_for());
    const std::thread::id outer = std::this_thread::get_id();
    parallel_for(16, [&](size_t j) {
      EXPECT_EQ(std::this_thread::get_id(), outer);
      ++hits[i * 16 + j];
    });
  });
  EXPECT_FALSE(in_parallel_for());
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ParallelFor, LoopsFromSeveralThreadsAtOnceEachRunEveryIndex) {
  PoolThreads pool(3);
  constexpr int kCallers = 4, kLoops = 50;
  std::vector<std::vector<int>> sums(kCallers, std::vector<int>(kLoops, 0));
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int l = 0; l < kLoops; ++l) {
        std::vector<int> out(97, 0);
        parallel_for(out.size(), [&](size_t i) { out[i] = static_cast<int>(i) + c; });
        for (int v : out) sums[c][l] += v;
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    for (int l = 0; l < kLoops; ++l) ASSERT_EQ(sums[c][l], 96 * 97 / 2 + 97 * c) << c << " " << l;
  }
}

TEST(ParallelFor, CarriesTheExceptionToTheCaller) {
  PoolThreads pool(4);
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

TEST(ParallelFor, SerialLoopAlsoRunsEveryIndexBeforeRethrowing) {
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_for(10, [&](size_t) {
    ++ran;
    throw std::runtime_error("every index fails");
  }, false), std::runtime_error);
  EXPECT_EQ(ran.load(), 10);
}

TEST(Threads, ResizesAndRefusesCountsOutOfRange) {
  PoolThreads pool(2);
  set_threads(5);
  EXPECT_EQ(threads(), 5);
  set_threads(1);
  EXPECT_EQ(threads(), 1);
  EXPECT_CONTAINS(test::error_message<Error>([] { set_threads(0); }), "threads=0; expected 1 to 1024");
  EXPECT_CONTAINS(test::error_message<Error>([] { set_threads(5000); }), "threads=5000");
  EXPECT_EQ(threads(), 1);
  EXPECT_GE(default_threads(), 1);
}

}  // namespace
}  // namespace veloxquant
