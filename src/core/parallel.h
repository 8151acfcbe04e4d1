// parallel_for on the library's thread pool (src/core/thread_pool.cpp). Items are handed out one
// at a time to whichever threads are running, the caller among them, so a worker that another
// process keeps off its core holds back at most the item it took, never the whole loop. The first
// exception thrown by an item reaches the caller after every other item has run.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

#include "veloxquant/threads.h"

namespace veloxquant {

namespace detail {
using LoopItem = void (*)(void* body, size_t i);
void run_loop(size_t n, LoopItem item, void* body, bool parallel);
}  // namespace detail

// True while the calling thread runs an item of a parallel_for: a loop inside it runs serially.
bool in_parallel_for();

// `parallel` false runs the loop on the calling thread: for work smaller than the cost of waking
// the other threads.
template <typename Fn>
void parallel_for(size_t n, Fn&& fn, bool parallel = true) {
  using Body = std::remove_reference_t<Fn>;
  void* body = const_cast<void*>(static_cast<const void*>(std::addressof(fn)));
  detail::run_loop(n, [](void* b, size_t i) { (*static_cast<Body*>(b))(i); }, body, parallel);
}

}  // namespace veloxquant
