// SqueezeAttention's layer budgets (Wang et al., arXiv 2404.04793).
#pragma once

#include <cstddef>
#include <vector>

namespace veloxquant {

// `similarity[l]`: cosine similarity of layer l's hidden state before and after its attention
// block, averaged over the prompt's tokens; the closer to 1, the less that layer's attention
// changed anything. Layers are clustered into three groups by k-means on it; the group of
// highest similarity keeps p * average tokens per head and what it frees is spread evenly over
// the other layers, so the total stays layers * average. One group (equal similarities) leaves
// every layer at the average.
std::vector<size_t> squeeze_budgets(const std::vector<double>& similarity, size_t average, double p);

}  // namespace veloxquant
