// The merge loop shared by both tokenizers: split text into characters, then keep joining the
// best adjacent pair. SentencePiece ranks pairs by vocabulary score, BPE by merge rank.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/unicode.h"

namespace veloxquant {

// Splits `text` into UTF-8 characters (by lead byte, as llama.cpp does; a truncated character at
// the end keeps the bytes that are there), then, while some adjacent pair has a priority
// (`priority(left, right)` returns std::nullopt for pairs that may not merge), merges the pair of
// highest priority, the leftmost among equals. Returns the remaining symbols in order.
template <class Priority>
std::vector<std::string_view> merge_adjacent_pairs(std::string_view text, Priority priority) {
  // Symbols form a linked list; a symbol merged into its left neighbour keeps its slot with
  // length 0.
  struct Symbol {
    size_t begin;
    size_t length;
    int prev;
    int next;
  };
  struct Candidate {
    double priority;
    int left;
    int right;
    size_t length;  // of the merged text, to detect a candidate made stale by another merge
  };
  struct Worse {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };

  std::vector<Symbol> symbols;
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::min(unicode::utf8_sequence_length(static_cast<uint8_t>(text[i])),
                              text.size() - i);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({i, n, index - 1, i + n == text.size() ? -1 : index + 1});
    i += n;
  }
  const auto view = [&](const Symbol& s) { return text.substr(s.begin, s.length); };

  std::priority_queue<Candidate, std::vector<Candidate>, Worse> queue;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (const std::optional<double> p = priority(view(l), view(r))) {
      queue.push({*p, left, right, l.length + r.length});
    }
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    // Symbols only grow, so a candidate is current exactly when both halves are alive and still
    // add up to it (llama.cpp's BPE compares the texts, which is the same test).
    if (left.length == 0 || right.length == 0 || left.length + right.length != c.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  std::vector<std::string_view> out;
  for (const Symbol& s : symbols) {
    if (s.length > 0) out.push_back(view(s));
  }
  return out;
}

}  // namespace veloxquant
