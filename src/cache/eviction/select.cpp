#include "cache/eviction/select.h"

#include <algorithm>
#include <numeric>

namespace veloxquant {

std::vector<Unit> stored_units(size_t sinks, size_t stream_tokens, StreamLayout keys,
                               StreamLayout values) {
  std::vector<Unit> units;
  units.reserve(sinks + stream_tokens);
  for (size_t t = 0; t < sinks; ++t) units.push_back({t, t + 1});
  for (size_t b = 0; b < stream_tokens;) {
    size_t e = b + 1;
    while (e < stream_tokens && !(keys.boundary(e) && values.boundary(e))) ++e;
    units.push_back({sinks + b, sinks + e});
    b = e;
  }
  return units;
}

std::vector<bool> keep_units(const std::vector<Unit>& units, const std::vector<float>& score,
                             size_t budget, size_t sinks, size_t recent) {
  const size_t n = units.empty() ? 0 : units.back().end;
  std::vector<bool> keep(units.size(), false);
  std::vector<float> best(units.size());
  std::vector<size_t> order;
  size_t kept = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    const Unit& x = units[u];
    if (x.begin < sinks || x.end + recent > n) {
      keep[u] = true;
      kept += x.size();
      continue;
    }
    best[u] = *std::max_element(score.begin() + static_cast<std::ptrdiff_t>(x.begin),
                                score.begin() + static_cast<std::ptrdiff_t>(x.end));
    order.push_back(u);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return best[a] != best[b] ? best[a] > best[b] : a > b;
  });
  for (size_t u : order) {
    if (kept + units[u].size() > budget) continue;  // a smaller unit further down may still fit
    keep[u] = true;
    kept += units[u].size();
  }
  return keep;
}

}  // namespace veloxquant
