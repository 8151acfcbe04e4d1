#include "codecs/zipcache/zipcache_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "codecs/common/affine_grid.h"
#include "core/bitpack.h"
#include "core/half_bytes.h"
#include "core/simd.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::zipcache {
namespace {

bool is_set(const uint8_t* bitmap, size_t t) { return ((bitmap[t / 8] >> (t % 8)) & 1u) != 0; }

// What ranks a block's g tokens: their attention, else (nullptr) their squared L2 norm, which
// orders them as the norm does.
void block_scores(const float* xb, const float* attention, size_t g, size_t d, double* score) {
  for (size_t t = 0; t < g; ++t) {
    if (attention != nullptr) {
      score[t] = attention[t];
      continue;
    }
    score[t] = 0;
    for (size_t c = 0; c < d; ++c) score[t] += static_cast<double>(xb[t * d + c]) * xb[t * d + c];
  }
}

// Writes the bitmap of the k highest scores among g (ties: lower position first).
void mark_salient(const double* score, size_t g, size_t k, uint8_t* bitmap) {
  std::fill(bitmap, bitmap + (g + 7) / 8, uint8_t{0});
  std::vector<uint32_t> order(g);
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](uint32_t i, uint32_t j) { return score[i] != score[j] ? score[i] > score[j] : i < j; });
  for (size_t i = 0; i < k; ++i) {
    bitmap[order[i] / 8] = static_cast<uint8_t>(bitmap[order[i] / 8] | (1u << (order[i] % 8)));
  }
}

// The channel scale of the authors' reference code, sqrt(max |x|) over the block, rounded up to
// fp16 so that every normalized element stays within [-c, c] (c <= 256 within the fp16 range).
uint16_t channel_scale(const float* xb, size_t g, size_t d, size_t c) {
  float m = 0.0f;
  for (size_t t = 0; t < g; ++t) m = std::max(m, std::fabs(xb[t * d + c]));
  const float root = std::sqrt(m);
  const uint16_t h = f32_to_f16(root);
  return f16_to_f32(h) < root ? static_cast<uint16_t>(h + 1) : h;
}

// fp16 fields encode() writes: finite; a step or scale also >= 0 (-0 from a group of mixed
// signed zeros is as good as 0).
bool finite_half(uint16_t h) { return (h & 0x7C00) != 0x7C00; }
bool nonnegative_half(uint16_t h) { return finite_half(h) && ((h & 0x8000) == 0 || h == 0x8000); }

}  // namespace

size_t salient_tokens(double fraction, size_t block) {
  return std::min(block, static_cast<size_t>(std::floor(fraction * static_cast<double>(block) + 0.5)));
}

ZipCacheCodec::ZipCacheCodec(size_t dim, size_t block, size_t salient, unsigned high_bits,
                             unsigned low_bits, bool channel_scales, Saliency saliency)
    : dim_(dim), block_(block), k_(salient), high_bytes_(packed_bytes(salient * dim, high_bits)),
      low_bytes_(packed_bytes((block - salient) * dim, low_bits)),
      block_bytes_((block + 7) / 8 + (channel_scales ? 2 * dim : 0) + 4 * block + high_bytes_ + low_bytes_),
      high_bits_(high_bits), low_bits_(low_bits), channel_scales_(channel_scales), saliency_(saliency) {}

void ZipCacheCodec::encode_salient(const float* x, size_t n, const float* attention, uint8_t* codes) const {
  const size_t d = dim_, g = block_;
  std::vector<double> score(g);
  std::vector<float> scale(d, 1.0f), y(d);
  std::vector<uint8_t> high(k_ * d), low((g - k_) * d);
  const bool by_attention = attention != nullptr && saliency_ == Saliency::Attention;
  for (size_t b = 0; b < n / g; ++b) {
    const float* xb = x + b * g * d;
    uint8_t* out = codes + b * block_bytes_;
    block_scores(xb, by_attention ? attention + b * g : nullptr, g, d, score.data());
    mark_salient(score.data(), g, k_, out);
    if (channel_scales_) {
      for (size_t c = 0; c < d; ++c) {
        const uint16_t h = channel_scale(xb, g, d, c);
        store_half(out + channel_scales_offset() + 2 * c, h);
        scale[c] = f16_to_f32(h);
      }
    }
    size_t hi = 0, li = 0;
    for (size_t t = 0; t < g; ++t) {
      // An all-zero channel has scale 0: its elements normalize to 0 and decode to 0.
      for (size_t c = 0; c < d; ++c) y[c] = scale[c] > 0.0f ? xb[t * d + c] / scale[c] : 0.0f;
      const auto [lo, top] = std::minmax_element(y.begin(), y.end());
      const bool salient = is_set(out, t);
      const AffineGrid grid = AffineGrid::fit(*lo, *top, salient ? high_bits_ : low_bits_);
      store_half(out + grids_offset() + 2 * t, grid.scale_f16);
      store_half(out + grids_offset() + 2 * (g + t), grid.min_f16);
      uint8_t* q = salient ? &high[hi] : &low[li];
      for (size_t c = 0; c < d; ++c) q[c] = grid.quantize(y[c]);
      (salient ? hi : li) += d;
    }
    pack_bits(high.data(), high.size(), high_bits_, out + high_offset());
    pack_bits(low.data(), low.size(), low_bits_, out + low_offset());
  }
}

void ZipCacheCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const size_t d = dim_, g = block_;
  std::vector<uint8_t> high(k_ * d), low((g - k_) * d);
  std::vector<float> scale(d, 1.0f);
  for (size_t b = 0; b < n / g; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    if (channel_scales_) {
      for (size_t c = 0; c < d; ++c) scale[c] = f16_to_f32(load_half(in + channel_scales_offset() + 2 * c));
    }
    unpack_bits(in + high_offset(), high.size(), high_bits_, high.data());
    unpack_bits(in + low_offset(), low.size(), low_bits_, low.data());
    const uint8_t* hq = high.data();
    const uint8_t* lq = low.data();
    for (size_t t = 0; t < g; ++t) {
      const float step = f16_to_f32(load_half(in + grids_offset() + 2 * t));
      const float mn = f16_to_f32(load_half(in + grids_offset() + 2 * (g + t)));
      const uint8_t*& q = is_set(in, t) ? hq : lq;
      float* xt = x + (b * g + t) * d;
      if (channel_scales_) {
        for (size_t c = 0; c < d; ++c) xt[c] = scale[c] * (mn + step * static_cast<float>(q[c]));
      } else {
        for (size_t c = 0; c < d; ++c) xt[c] = mn + step * static_cast<float>(q[c]);
      }
      q += d;
    }
  }
}

void ZipCacheCodec::block_rows(const uint8_t* block, float* rows, std::vector<size_t>& order) const {
  unpack_bits_f32(block + high_offset(), k_ * dim_, high_bits_, rows);
  unpack_bits_f32(block + low_offset(), (block_ - k_) * dim_, low_bits_, rows + k_ * dim_);
  size_t high = 0, low = k_;
  for (size_t t = 0; t < block_; ++t) order[t] = is_set(block, t) ? high++ : low++;
}

void ZipCacheCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  const size_t d = dim_, g = block_;
  std::vector<float> rows(g * d), folded(nq * d), folded_sum(nq), sums(nq * g);
  std::vector<size_t> order(g);
  for (size_t b = 0; b < n / g; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    for (size_t j = 0; j < nq; ++j) {
      float total = 0;
      for (size_t c = 0; c < d; ++c) {
        const float scale = channel_scales_ ? f16_to_f32(load_half(in + channel_scales_offset() + 2 * c))
                                            : 1.0f;
        total += folded[j * d + c] = q[j * d + c] * scale;
      }
      folded_sum[j] = total;
    }
    block_rows(in, rows.data(), order);
    simd::dot_f32_rows(folded.data(), nq, rows.data(), g, d, sums.data());
    for (size_t t = 0; t < g; ++t) {
      const float step = f16_to_f32(load_half(in + grids_offset() + 2 * t));
      const float mn = f16_to_f32(load_half(in + grids_offset() + 2 * (g + t)));
      for (size_t j = 0; j < nq; ++j)
        scores[j * n + b * g + t] = step * sums[j * g + order[t]] + mn * folded_sum[j];
    }
  }
}

void ZipCacheCodec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n, float* out) const {
  if (channel_scales_) return Codec::accumulate(w, nq, codes, n, out);  // keys: attention never sums them
  const size_t d = dim_, g = block_;
  std::vector<float> rows(g * d), weights(nq * g), offset(nq, 0.0f);
  std::vector<size_t> order(g);
  for (size_t b = 0; b < n / g; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    block_rows(in, rows.data(), order);
    for (size_t t = 0; t < g; ++t) {
      const float step = f16_to_f32(load_half(in + grids_offset() + 2 * t));
      const float mn = f16_to_f32(load_half(in + grids_offset() + 2 * (g + t)));
      for (size_t j = 0; j < nq; ++j) {
        weights[j * g + order[t]] = w[j * n + b * g + t] * step;
        offset[j] += w[j * n + b * g + t] * mn;
      }
    }
    simd::accumulate_f32_rows(weights.data(), nq, rows.data(), g, d, out);
  }
  for (size_t j = 0; j < nq; ++j)
    for (size_t c = 0; c < d; ++c) out[j * d + c] += offset[j];
}

void ZipCacheCodec::check_codes(const uint8_t* codes, size_t n) const {
  const char* stream = channel_scales_ ? "key" : "value";
  for (size_t b = 0; b < n / block_; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    const std::string at = std::string("zipcache: corrupt ") + stream + " codes: block " + std::to_string(b) + ", ";
    size_t set = 0;
    for (size_t i = 0; i < bitmap_bytes(); ++i) set += static_cast<size_t>(std::popcount(static_cast<unsigned>(in[i])));
    const bool padding_clear = block_ % 8 == 0 || (in[block_ / 8] >> (block_ % 8)) == 0;
    if (set != k_ || !padding_clear) {
      throw Error(at + "saliency bitmap has " + std::to_string(set) + " bits set" +
                  (padding_clear ? "" : " (some beyond the block's " + std::to_string(block_) + " tokens)") +
                  "; expected exactly " + std::to_string(k_) + " salient tokens of " + std::to_string(block_));
    }
    for (size_t c = 0; channel_scales_ && c < dim_; ++c) {
      const uint16_t s = load_half(in + channel_scales_offset() + 2 * c);
      if (!nonnegative_half(s)) {
        throw Error(at + "channel scale of channel " + std::to_string(c) + " is " + std::to_string(f16_to_f32(s)) +
                    "; expected a finite scale >= 0");
      }
    }
    for (size_t t = 0; t < block_; ++t) {
      const uint16_t s = load_half(in + grids_offset() + 2 * t), mn = load_half(in + grids_offset() + 2 * (block_ + t));
      if (!nonnegative_half(s) || !finite_half(mn)) {
        throw Error(at + "grid of token " + std::to_string(t) + " stores step " + std::to_string(f16_to_f32(s)) +
                    " and minimum " + std::to_string(f16_to_f32(mn)) +
                    "; expected a finite step >= 0 and a finite minimum");
      }
    }
  }
}

}  // namespace veloxquant::zipcache
