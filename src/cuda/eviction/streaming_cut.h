// Which of an evicting GPU cache's stream tokens stay after a step (streaming_llm): the newest
// whole units that fit the budget beside the sinks, as the CPU cache's select.h keeps them. A unit
// is an encoded block of both streams or one fp16 row; newer units are never larger than older
// ones, so the greedy keep by recency is a suffix of the stream. Plain C++: the CPU tests check it
// against select.h.
#pragma once

#include <cstddef>

namespace veloxquant::cuda {

struct StreamCut {
  size_t tokens;                      // stream tokens appended so far (dropped ones included)
  size_t dropped;                     // the first stream tokens gone already
  size_t key_encoded, value_encoded;  // tokens held as codes, counted from the stream's start
  size_t key_block, value_block;      // tokens per encoded block of each stream
};

// The first stream token kept when `room` stream tokens may stay (the budget less the sinks).
inline size_t first_kept(const StreamCut& s, size_t room) {
  if (s.tokens - s.dropped <= room) return s.dropped;
  auto boundary = [&](size_t t) {
    return (t >= s.key_encoded || (t - s.dropped) % s.key_block == 0) &&
           (t >= s.value_encoded || (t - s.dropped) % s.value_block == 0);
  };
  size_t t = s.tokens - room;
  while (!boundary(t)) ++t;
  return t;
}

}  // namespace veloxquant::cuda
