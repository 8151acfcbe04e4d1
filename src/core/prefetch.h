// Asks for memory a streaming kernel reads next. The hardware prefetchers stop at each 4 KiB page
// and run only a short way ahead: a kernel that computes on each block of codes between its reads
// leaves memory idle unless the next blocks are requested while it works on this one.
#pragma once

#include <hwy/cache_control.h>

#include <cstddef>
#include <cstdint>

namespace veloxquant {

// Every 64-byte line of [p, p + bytes) towards the caches; no effect on what the program computes.
inline void prefetch_range(const void* p, size_t bytes) {
  const auto* c = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < bytes; i += 64) hwy::Prefetch(c + i);
}

}  // namespace veloxquant
