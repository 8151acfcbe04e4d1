#include "codecs/kept_rows.h"

#include <algorithm>
#include <numeric>

#include "core/half_bytes.h"

namespace veloxquant::kept_rows {

std::vector<size_t> pick(const float* rank, size_t n, size_t k) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank[a] > rank[b]; });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

void fill(float* block, size_t n, size_t d, const std::vector<size_t>& kept) {
  size_t filler = 0;
  while (filler < n && std::binary_search(kept.begin(), kept.end(), filler)) ++filler;
  for (size_t t : kept) std::copy_n(block + filler * d, d, block + t * d);
}

std::string index_error(const uint8_t* index, size_t k, size_t n) {
  for (size_t i = 0; i < k; ++i) {
    const size_t t = load_half(index + 2 * i), before = i ? load_half(index + 2 * (i - 1)) : 0;
    if (t >= n || (i && t <= before)) {
      return std::to_string(i) + " is token " + std::to_string(t) +
             "; expected strictly increasing indices below " + std::to_string(n);
    }
  }
  return "";
}

}  // namespace veloxquant::kept_rows
