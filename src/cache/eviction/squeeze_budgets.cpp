#include "cache/eviction/squeeze_budgets.h"

#include <algorithm>
#include <cmath>

namespace veloxquant {
namespace {

// Lloyd's k-means on a line with k = 3, centres started at the minimum, the middle and the
// maximum; returns each value's group (0 = lowest centre).
std::vector<int> three_groups(const std::vector<double>& x) {
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  double centre[3] = {*lo, (*lo + *hi) / 2, *hi};
  std::vector<int> group(x.size(), 0);
  for (int iter = 0; iter < 100; ++iter) {
    bool moved = false;
    for (size_t i = 0; i < x.size(); ++i) {
      int g = 0;
      for (int c = 1; c < 3; ++c)
        if (std::fabs(x[i] - centre[c]) < std::fabs(x[i] - centre[g])) g = c;
      moved |= g != group[i];
      group[i] = g;
    }
    for (int c = 0; c < 3; ++c) {
      double sum = 0;
      size_t n = 0;
      for (size_t i = 0; i < x.size(); ++i)
        if (group[i] == c) sum += x[i], ++n;
      if (n) centre[c] = sum / static_cast<double>(n);
    }
    if (!moved && iter > 0) break;
  }
  return group;
}

}  // namespace

std::vector<size_t> squeeze_budgets(const std::vector<double>& similarity, size_t average, double p) {
  std::vector<size_t> budgets(similarity.size(), average);
  if (similarity.size() < 2) return budgets;
  const std::vector<int> group = three_groups(similarity);
  const int top = *std::max_element(group.begin(), group.end());
  const size_t squeezed = static_cast<size_t>(std::count(group.begin(), group.end(), top));
  if (top == 0 || squeezed == similarity.size()) return budgets;  // one group: nothing to move
  const size_t low = static_cast<size_t>(std::floor(p * static_cast<double>(average)));
  const size_t freed = (average - low) * squeezed, others = similarity.size() - squeezed;
  for (size_t l = 0; l < similarity.size(); ++l) {
    budgets[l] = group[l] == top ? low : average + freed / others;
  }
  return budgets;
}

}  // namespace veloxquant
