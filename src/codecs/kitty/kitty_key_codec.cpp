#include "codecs/kitty/kitty_key_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "codecs/common/affine_grid.h"
#include "core/bitpack.h"
#include "core/half_bytes.h"
#include "core/simd.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::kitty {
namespace {

bool boosted(const uint8_t* mask, size_t c) { return ((mask[c / 8] >> (c % 8)) & 1u) != 0; }

}  // namespace

size_t boost_channels(double boost, size_t dim) {
  return std::min(dim, static_cast<size_t>(std::floor(boost * static_cast<double>(dim) + 0.5)));
}

KittyKeyCodec::KittyKeyCodec(size_t dim, unsigned bits, unsigned high_bits, size_t boost, size_t group)
    : dim_(dim), group_(group), k_(boost), low_bytes_(packed_bytes(group * (dim - boost), bits)),
      high_bytes_(packed_bytes(group * boost, high_bits)),
      block_bytes_((dim + 7) / 8 + 4 * dim + low_bytes_ + high_bytes_), bits_(bits),
      high_bits_(high_bits) {}

void KittyKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const size_t d = dim_, g = group_;
  std::vector<float> lo(d), hi(d), range(d);
  std::vector<uint32_t> order(d);
  std::vector<AffineGrid> grids(d);
  std::vector<uint8_t> low(g * (d - k_)), high(g * k_);
  for (size_t b = 0; b < n / g; ++b) {
    const float* xb = x + b * g * d;
    uint8_t* out = codes + b * block_bytes_;
    for (size_t c = 0; c < d; ++c) {
      lo[c] = hi[c] = xb[c];
      for (size_t t = 1; t < g; ++t) lo[c] = std::min(lo[c], xb[t * d + c]), hi[c] = std::max(hi[c], xb[t * d + c]);
      range[c] = hi[c] - lo[c];
    }
    // The k channels with the widest range (ties: lower channel first) get the high bits.
    std::fill(out, out + mask_bytes(), uint8_t{0});
    if (k_ > 0) {
      std::iota(order.begin(), order.end(), 0u);
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k_), order.end(),
                        [&](uint32_t i, uint32_t j) { return range[i] != range[j] ? range[i] > range[j] : i < j; });
      for (size_t i = 0; i < k_; ++i) out[order[i] / 8] = static_cast<uint8_t>(out[order[i] / 8] | (1u << (order[i] % 8)));
    }
    for (size_t c = 0; c < d; ++c) {
      grids[c] = AffineGrid::fit(lo[c], hi[c], boosted(out, c) ? high_bits_ : bits_);
      store_half(out + grids_offset() + 2 * c, grids[c].scale_f16);
      store_half(out + grids_offset() + 2 * (d + c), grids[c].min_f16);
    }
    size_t li = 0, hi_i = 0;
    for (size_t t = 0; t < g; ++t)
      for (size_t c = 0; c < d; ++c) {
        const uint8_t q = grids[c].quantize(xb[t * d + c]);
        if (boosted(out, c)) high[hi_i++] = q;
        else low[li++] = q;
      }
    pack_bits(low.data(), low.size(), bits_, out + low_offset());
    pack_bits(high.data(), high.size(), high_bits_, out + high_offset());
  }
}

void KittyKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const size_t d = dim_, g = group_;
  std::vector<uint8_t> low(g * (d - k_)), high(g * k_);
  std::vector<float> scale(d), mins(d);
  std::vector<uint8_t> is_high(d);
  for (size_t b = 0; b < n / g; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    for (size_t c = 0; c < d; ++c) {
      scale[c] = f16_to_f32(load_half(in + grids_offset() + 2 * c));
      mins[c] = f16_to_f32(load_half(in + grids_offset() + 2 * (d + c)));
      is_high[c] = boosted(in, c) ? 1 : 0;
    }
    unpack_bits(in + low_offset(), low.size(), bits_, low.data());
    unpack_bits(in + high_offset(), high.size(), high_bits_, high.data());
    float* xb = x + b * g * d;
    size_t li = 0, hi_i = 0;
    // The same expression as KIVI's decode: boost 0 gives KIVI's keys bit for bit.
    for (size_t t = 0; t < g; ++t)
      for (size_t c = 0; c < d; ++c) {
        const uint8_t q = is_high[c] ? high[hi_i++] : low[li++];
        xb[t * d + c] = mins[c] + scale[c] * static_cast<float>(q);
      }
  }
}

void KittyKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  const size_t d = dim_, g = group_, low_n = d - k_;
  std::vector<float> low_f(g * low_n), high_f(g * k_), scales(d), mins(d), folded_low(nq * low_n),
      folded_high(nq * k_), offset(nq), sums_low(nq * g), sums_high(nq * g);
  for (size_t b = 0; b < n / g; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    for (size_t c = 0; c < d; ++c) {
      scales[c] = f16_to_f32(load_half(in + grids_offset() + 2 * c));
      mins[c] = f16_to_f32(load_half(in + grids_offset() + 2 * (d + c)));
    }
    for (size_t j = 0; j < nq; ++j) {
      const float* qj = q + j * d;
      size_t li = 0, hi_i = 0;
      for (size_t c = 0; c < d; ++c) {
        const float folded = qj[c] * scales[c];
        if (boosted(in, c)) folded_high[j * k_ + hi_i++] = folded;
        else folded_low[j * low_n + li++] = folded;
      }
      offset[j] = simd::dot(qj, mins.data(), d);
    }
    unpack_bits_f32(in + low_offset(), low_f.size(), bits_, low_f.data());
    unpack_bits_f32(in + high_offset(), high_f.size(), high_bits_, high_f.data());
    simd::dot_f32_rows(folded_low.data(), nq, low_f.data(), g, low_n, sums_low.data());
    simd::dot_f32_rows(folded_high.data(), nq, high_f.data(), g, k_, sums_high.data());
    for (size_t j = 0; j < nq; ++j)
      for (size_t t = 0; t < g; ++t)
        scores[j * n + b * g + t] = sums_low[j * g + t] + sums_high[j * g + t] + offset[j];
  }
}

void KittyKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t b = 0; b < n / group_; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    const std::string at = "kitty: corrupt key codes: block " + std::to_string(b) + ", ";
    size_t set = 0;
    for (size_t i = 0; i < mask_bytes(); ++i) set += static_cast<size_t>(std::popcount(static_cast<unsigned>(in[i])));
    const bool padding_clear = dim_ % 8 == 0 || (in[dim_ / 8] >> (dim_ % 8)) == 0;
    if (set != k_ || !padding_clear) {
      throw Error(at + "channel mask has " + std::to_string(set) + " bits set" +
                  (padding_clear ? "" : " (some beyond head_dim " + std::to_string(dim_) + ")") +
                  "; expected exactly " + std::to_string(k_) + " boosted channels below head_dim " +
                  std::to_string(dim_));
    }
    for (size_t c = 0; c < dim_; ++c) {
      const uint16_t s = load_half(in + grids_offset() + 2 * c), mn = load_half(in + grids_offset() + 2 * (dim_ + c));
      // A channel of negative zeros stores the step -0 (0x8000), as good as 0.
      const bool step_ok = (s & 0x7C00) != 0x7C00 && ((s & 0x8000) == 0 || s == 0x8000);
      const bool min_ok = (mn & 0x7C00) != 0x7C00;
      if (!step_ok || !min_ok) {
        throw Error(at + "grid of channel " + std::to_string(c) + " stores step " + std::to_string(f16_to_f32(s)) +
                    " and minimum " + std::to_string(f16_to_f32(mn)) +
                    "; expected a finite step >= 0 and a finite minimum");
      }
    }
  }
}

}  // namespace veloxquant::kitty
