// The process-wide pool behind parallel_for and veloxquant/threads.h.
//
// OpenMP's fork-join regions end at a barrier every thread of the team must reach, so when
// another process holds a core, each region waits for the descheduled thread's next time slice
// (the decode step fell 20-45x on a busy 2-core machine). Here nothing waits for a thread that
// took no item: items are claimed from a shared counter, the caller claims too, and the loop is
// done when its items are, not when its threads are. Idle workers spin briefly (the gaps between
// a decode step's loops are tens of microseconds) and then sleep on a futex, so a busy machine
// loses no core to spinning.
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr int kMaxThreads = 1024;

// One loop's items. Shared with the workers that join it, so a worker that wakes after the loop
// has ended finds its counter exhausted, not freed memory; the body is touched only for claimed
// items, all of which end before the caller returns.
struct Loop {
  Loop(size_t items, detail::LoopItem fn, void* loop_body) : n(items), left(items), item(fn), body(loop_body) {}
  const size_t n;
  std::atomic<size_t> next{0};
  std::atomic<size_t> left;          // items not yet finished
  std::atomic<uint32_t> finished{0};  // set by whoever finishes the last item
  std::atomic<bool> caller_sleeps{false};
  const detail::LoopItem item;
  void* const body;
  std::mutex error_mutex;
  std::exception_ptr error;
};

static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free);

thread_local bool t_in_loop = false;

// Sleeps while `word` holds `expected` (spurious returns are possible; callers loop), and wakes
// every sleeper on `word`. Raw futexes: the sleep and the wake pair up on the word itself.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void run_items(Loop& loop) {
  const bool outer = t_in_loop;
  t_in_loop = true;
  for (size_t i; (i = loop.next.fetch_add(1, std::memory_order_relaxed)) < loop.n;) {
    try {
      loop.item(loop.body, i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(loop.error_mutex);
      if (!loop.error) loop.error = std::current_exception();
    }
    if (loop.left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      loop.finished.store(1, std::memory_order_seq_cst);
      if (loop.caller_sleeps.load(std::memory_order_seq_cst)) futex_wake_all(loop.finished);
    }
  }
  t_in_loop = outer;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or `budget` has passed; true when done() held.
template <class Done>
bool spin_until(Done done, std::chrono::microseconds budget) {
  if (budget.count() == 0) return done();
  const auto end = std::chrono::steady_clock::now() + budget;
  for (unsigned k = 1;; ++k) {
    if (done()) return true;
    cpu_relax();
    if (k % 64 == 0) {
      if (std::chrono::steady_clock::now() >= end) return done();
    }
  }
}

// Integer in [lo, hi] from an environment variable, or `fallback` when unset.
int env_int(const char* name, int lo, int hi, int fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < lo || v > hi) {
    throw Error(std::string(name) + "='" + text + "'; expected an integer from " + std::to_string(lo) +
                " to " + std::to_string(hi));
  }
  return static_cast<int>(v);
}

// How long an idle thread spins before it sleeps on its futex: long enough to bridge the gap
// between two loops of a decode step on an idle machine, short enough that a spinning thread
// takes little from the processes it shares the cores with. Spinning 50 us, 0 and 1000 us, and
// backing off while pool threads were being preempted, were measured with
// bench/cpu_contention.py next to 0, 1 and 2 busy processes: 50 us was as fast as any when idle
// and the best under load (bench/results/cpu_contention.md, docs/runtime.md).
std::chrono::microseconds spin_budget() {
  static const std::chrono::microseconds budget{env_int("VELOXQUANT_SPIN_US", 0, 1000000, 50)};
  return budget;
}

// The threads this process can keep busy without oversubscribing: one per physical core of its
// affinity mask (SMT siblings share a core's vector units, which the products saturate), and no
// more than a cgroup v2 CPU quota (a container limited to 2 CPUs on a large host) allows.
int machine_threads() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  std::set<std::pair<long, long>> cores;  // (package, core)
  int cpus_allowed = 0;
  const auto read_long = [](const std::string& path, long fallback) {
    std::ifstream in(path);
    long v = 0;
    return (in >> v) ? v : fallback;
  };
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &cpus)) continue;
    ++cpus_allowed;
    const std::string topo = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    cores.emplace(read_long(topo + "physical_package_id", 0), read_long(topo + "core_id", c));
  }
  int n = cores.empty() ? cpus_allowed : static_cast<int>(cores.size());
  std::ifstream quota_file("/sys/fs/cgroup/cpu.max");
  std::string quota;
  long period = 0;
  if (quota_file >> quota >> period && quota != "max" && period > 0) {
    const long q = std::strtol(quota.c_str(), nullptr, 10);
    if (q > 0) n = std::min<long>(n, std::max<long>(1, (q + period - 1) / period));
  }
  return std::max(1, n);
}

class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  ~Pool() { stop_workers(); }

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void resize(int n) {
    std::lock_guard<std::mutex> lock(submit_);
    if (n == threads()) return;
    stop_workers();
    threads_.store(n, std::memory_order_relaxed);
    start_workers();
  }

  void run(size_t n, detail::LoopItem item, void* body, bool parallel) {
    if (n == 0) return;
    // Serial when asked, for one item, inside another loop's item, or while another thread's
    // loop holds the pool (the threads are busy with it).
    std::unique_lock<std::mutex> lock(submit_, std::defer_lock);
    if (!parallel || n == 1 || t_in_loop || !lock.try_lock() || workers_.empty()) {
      Loop loop(n, item, body);
      run_items(loop);
      if (loop.error) std::rethrow_exception(loop.error);
      return;
    }
    const auto loop = std::make_shared<Loop>(n, item, body);
    {
      std::lock_guard<std::mutex> g(loop_mutex_);
      loop_ = loop;
    }
    wake_workers();
    run_items(*loop);
    // Wait only for items other threads have taken and not finished.
    const auto finished = [&] { return loop->finished.load(std::memory_order_acquire) != 0; };
    if (!spin_until(finished, spin_budget())) {
      // Counted as sleeping before the last check: either the finisher sees it or this sees finished.
      loop->caller_sleeps.store(true, std::memory_order_seq_cst);
      while (loop->finished.load(std::memory_order_seq_cst) == 0) futex_wait(loop->finished, 0);
    }
    {
      std::lock_guard<std::mutex> g(loop_mutex_);
      loop_.reset();
    }
    if (loop->error) std::rethrow_exception(loop->error);
  }

 private:
  Pool() : threads_(default_threads()) { start_workers(); }

  void wake_workers() {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    // A worker counts itself as sleeping before it checks the epoch and sleeps, so either it
    // sees the new epoch or this sees it counted.
    if (sleeping_.load(std::memory_order_seq_cst) > 0) futex_wake_all(epoch_);
  }

  void start_workers() {
    stop_.store(false, std::memory_order_relaxed);
    // The epoch a worker starts from is read here, not on the new thread: a thread that starts
    // late must still see the next bump (a stop among them) as a change.
    const uint32_t now = epoch_.load(std::memory_order_acquire);
    for (int i = 1; i < threads(); ++i) workers_.emplace_back([this, now] { work(now); });
  }

  void stop_workers() {
    if (workers_.empty()) return;
    stop_.store(true, std::memory_order_seq_cst);
    wake_workers();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void work(uint32_t seen) {
    for (;;) {
      const auto changed = [&] { return epoch_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(changed, spin_budget())) {
        sleeping_.fetch_add(1, std::memory_order_seq_cst);
        while (epoch_.load(std::memory_order_seq_cst) == seen) futex_wait(epoch_, seen);
        sleeping_.fetch_sub(1, std::memory_order_relaxed);
      }
      seen = epoch_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_acquire)) return;
      std::shared_ptr<Loop> loop;
      {
        std::lock_guard<std::mutex> g(loop_mutex_);
        loop = loop_;
      }
      if (loop) run_items(*loop);
    }
  }

  std::atomic<int> threads_;
  std::vector<std::thread> workers_;
  std::mutex submit_;  // one loop on the pool at a time; held by resize
  std::mutex loop_mutex_;
  std::shared_ptr<Loop> loop_;  // the loop in flight, null between loops
  std::atomic<uint32_t> epoch_{0};  // bumped for each loop, and to stop
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace

namespace detail {
void run_loop(size_t n, LoopItem item, void* body, bool parallel) { Pool::instance().run(n, item, body, parallel); }
}  // namespace detail

bool in_parallel_for() { return t_in_loop; }

int threads() { return Pool::instance().threads(); }

void set_threads(int n) {
  if (n < 1 || n > kMaxThreads) {
    throw Error("threads=" + std::to_string(n) + "; expected 1 to " + std::to_string(kMaxThreads));
  }
  Pool::instance().resize(n);
}

int default_threads() {
  return env_int("VELOXQUANT_THREADS", 1, kMaxThreads, std::clamp(machine_threads(), 1, kMaxThreads));
}

}  // namespace veloxquant
