#include "serve/kv_pages.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant::serve {

size_t KvByteModel::bytes(size_t tokens) const {
  return static_cast<size_t>(std::ceil(fixed + per_token * static_cast<double>(tokens)));
}

KvByteModel measure_kv_bytes(const Model& model, const std::string& spec_text, size_t up_to) {
  const ModelConfig& c = model.config();
  const Spec spec = parse_spec(spec_text);
  std::vector<LayerShape> shapes = cache_shapes(c);
  std::shared_ptr<const CalibrationArtifact> calibration;
  if (spec.method->calibrated() && !spec.params.get_text("artifacts").empty())
    calibration = load_calibration(spec.params.get_text("artifacts"), spec);
  for (LayerShape& shape : shapes) shape.calibration = calibration;
  std::vector<KVCache> caches = make_layer_caches(spec, shapes);
  // Keys and values like a model's: unit-scale normal values; the same block for every layer.
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  size_t width = 0;  // the widest layer's keys of one token; narrower layers take their first ones
  for (const LayerShape& s : shapes) width = std::max(width, s.kv_heads * s.head_dim);
  std::vector<std::pair<size_t, size_t>> points;  // (tokens, bytes of layer 0 .. all layers)
  size_t tokens = 0;
  for (size_t target = 64; target <= up_to; target *= 2) {
    const size_t n = target - tokens;
    std::vector<float> k(n * width), v(n * width);
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    std::vector<int64_t> positions(n);
    for (size_t i = 0; i < n; ++i) positions[i] = static_cast<int64_t>(tokens + i);
    for (size_t l = 0; l < caches.size(); ++l) {
      const size_t kv_heads = shapes[l].kv_heads, head_dim = shapes[l].head_dim;
      caches[l].append(TensorView::f32(k.data(), {n, kv_heads, head_dim}),
                       TensorView::f32(v.data(), {n, kv_heads, head_dim}), positions, shapes[l].rope);
    }
    for (KVCache& cache : caches) cache.finish_step();
    tokens = target;
    size_t bytes = 0;
    for (const KVCache& cache : caches) bytes += cache.bytes();
    points.emplace_back(tokens, bytes);
  }
  if (points.size() < 2)
    throw Error("measure_kv_bytes up to " + std::to_string(up_to) + " tokens; expected >= 128");
  KvByteModel m;
  size_t t0 = 0, b0 = 0;
  for (const auto& [t, b] : points) {
    m.fastest = std::max(m.fastest,
                         (static_cast<double>(b) - static_cast<double>(b0)) / static_cast<double>(t - t0));
    t0 = t, b0 = b;
  }
  const auto& [t1, b1] = points[points.size() - 2];
  const auto& [t2, b2] = points.back();
  m.per_token = std::max(0.0,
                         (static_cast<double>(b2) - static_cast<double>(b1)) / static_cast<double>(t2 - t1));
  for (const auto& [t, b] : points)
    m.fixed = std::max(m.fixed, static_cast<double>(b) - m.per_token * static_cast<double>(t));
  return m;
}

PagePool::PagePool(KvByteModel model, size_t budget_bytes, size_t page_tokens)
    : model_(model), page_tokens_(page_tokens) {
  if (page_tokens == 0) throw Error("page of 0 tokens; expected at least 1");
  page_bytes_ =
      std::max<size_t>(1, static_cast<size_t>(std::ceil(model.per_token * static_cast<double>(page_tokens))));
  total_ = free_ = budget_bytes / page_bytes_;
}

size_t PagePool::pages_for(size_t tokens) const {
  const size_t rounded = (tokens + page_tokens_ - 1) / page_tokens_ * page_tokens_;
  return (model_.bytes(rounded) + page_bytes_ - 1) / page_bytes_;
}

bool PagePool::take(size_t n) {
  if (n > free_) return false;
  free_ -= n;
  return true;
}

void PagePool::give(size_t n) {
  if (n > used())
    throw Error("page pool: " + std::to_string(n) + " pages given back; only " + std::to_string(used()) +
                " are taken");
  free_ += n;
}

}  // namespace veloxquant::serve
