#include "codecs/minicache/minicache_pair_codec.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <string>

#include "codecs/kept_rows.h"
#include "codecs/minicache/slerp.h"
#include "core/half_bytes.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::minicache {
namespace {

double norm_of(const float* x, size_t d) {
  double s = 0;
  for (size_t c = 0; c < d; ++c) s += static_cast<double>(x[c]) * x[c];
  return std::sqrt(s);
}

void store_f32(uint8_t* p, float x) { std::memcpy(p, &x, 4); }
float load_f32(const uint8_t* p) {
  float x;
  std::memcpy(&x, p, 4);
  return x;
}

void store_rows(const float* x, size_t d, const std::vector<size_t>& rows, uint8_t* out) {
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t c = 0; c < d; ++c) store_half(out + 2 * (i * d + c), f32_to_f16(x[rows[i] * d + c]));
}

}  // namespace

MiniCachePairCodec::MiniCachePairCodec(std::unique_ptr<Codec> base, size_t group, size_t retained, double t)
    : base_(std::move(base)), group_(group), retained_(retained), t_(t),
      base_bytes_(base_->code_bytes(group)),
      leader_block_(base_bytes_ + 4 * group + 2 * retained + 2 * retained * base_->dim()),
      follower_block_(4 * group + 2 * retained * base_->dim()), view_codec_(base_->dim()) {}

std::vector<size_t> MiniCachePairCodec::retained_tokens(const uint8_t* leader_codes, size_t b) const {
  const uint8_t* index = leader_codes + b * leader_block_ + base_bytes_ + 4 * group_;
  std::vector<size_t> tokens(retained_);
  for (size_t i = 0; i < retained_; ++i) tokens[i] = load_half(index + 2 * i);
  return tokens;
}

void MiniCachePairCodec::encode(const float* leader, const float* follower, size_t n,
                                uint8_t* leader_codes, uint8_t* follower_codes) const {
  const size_t d = dim(), g = group_;
  std::vector<float> directions(g * d), distance(g), u(d), v(d);
  for (size_t b = 0; b < n / g; ++b) {
    const float* xa = leader + b * g * d;
    const float* xb = follower + b * g * d;
    uint8_t* lead = leader_codes + b * leader_block_;
    uint8_t* next = follower_codes + b * follower_block_;
    for (size_t t = 0; t < g; ++t) {
      const float* a = xa + t * d;
      const float* c = xb + t * d;
      const double na = norm_of(a, d), nb = norm_of(c, d);
      // A zero vector has no direction: it takes the other layer's, and its magnitude 0 restores it.
      for (size_t i = 0; i < d; ++i) {
        u[i] = na > 0 ? static_cast<float>(a[i] / na) : nb > 0 ? static_cast<float>(c[i] / nb) : 0.0f;
        v[i] = nb > 0 ? static_cast<float>(c[i] / nb) : u[i];
      }
      const double angle = angle_between(a, c, d);
      distance[t] = static_cast<float>(angle / std::numbers::pi);
      if (na > 0 || nb > 0) slerp(u.data(), v.data(), d, angle, t_, directions.data() + t * d);
      else std::fill_n(directions.data() + t * d, d, 0.0f);
      store_f32(lead + base_bytes_ + 4 * t, static_cast<float>(na));
      store_f32(next + 4 * t, static_cast<float>(nb));
    }
    const std::vector<size_t> kept = kept_rows::pick(distance.data(), g, retained_);
    kept_rows::fill(directions.data(), g, d, kept);
    base_->encode(directions.data(), g, lead);
    uint8_t* index = lead + base_bytes_ + 4 * g;
    for (size_t i = 0; i < kept.size(); ++i) store_half(index + 2 * i, static_cast<uint16_t>(kept[i]));
    store_rows(xa, d, kept, index + 2 * retained_);
    store_rows(xb, d, kept, next + 4 * g);
  }
}

const uint8_t* MiniCachePairCodec::view(bool follower, const uint8_t* leader_codes,
                                        const uint8_t* follower_codes, size_t n,
                                        std::vector<uint8_t>& scratch) const {
  const size_t d = dim(), g = group_;
  scratch.resize(view_codec_.code_bytes(n));
  auto* out = reinterpret_cast<float*>(scratch.data());
  for (size_t b = 0; b < n / g; ++b) {
    const uint8_t* lead = leader_codes + b * leader_block_;
    const uint8_t* own = follower ? follower_codes + b * follower_block_ : lead + base_bytes_;
    const uint8_t* rows = follower ? own + 4 * g : lead + base_bytes_ + 4 * g + 2 * retained_;
    float* x = out + b * g * d;
    base_->decode(lead, g, x);
    for (size_t t = 0; t < g; ++t) {
      const double length = norm_of(x + t * d, d);
      const double scale = length > 0 ? load_f32(own + 4 * t) / length : 0.0;
      for (size_t c = 0; c < d; ++c) x[t * d + c] = static_cast<float>(x[t * d + c] * scale);
    }
    const std::vector<size_t> kept = retained_tokens(leader_codes, b);
    for (size_t i = 0; i < kept.size(); ++i)
      for (size_t c = 0; c < d; ++c) x[kept[i] * d + c] = f16_to_f32(load_half(rows + 2 * (i * d + c)));
  }
  return scratch.data();
}

void MiniCachePairCodec::check_codes(bool follower, const uint8_t* codes, size_t n) const {
  const size_t d = dim(), g = group_;
  const std::string layer = follower ? "follower" : "leader";
  auto fail = [&](size_t b, const std::string& what) {
    throw Error("minicache: corrupt " + layer + " codes: block " + std::to_string(b) + ", " + what);
  };
  for (size_t b = 0; b < n / g; ++b) {
    const uint8_t* block = codes + b * (follower ? follower_block_ : leader_block_);
    if (!follower) base_->check_codes(block, g);
    const uint8_t* magnitudes = follower ? block : block + base_bytes_;
    for (size_t t = 0; t < g; ++t) {
      const float m = load_f32(magnitudes + 4 * t);
      if (!std::isfinite(m) || m < 0) fail(b, "token " + std::to_string(t) + " has magnitude " + std::to_string(m) + "; expected a finite magnitude >= 0");
    }
    const uint8_t* rows = magnitudes + 4 * g;
    if (!follower) {
      if (const std::string why = kept_rows::index_error(rows, retained_, g); !why.empty()) fail(b, "retained token " + why);
      rows += 2 * retained_;
    }
    for (size_t i = 0; i < retained_ * d; ++i) {
      if ((load_half(rows + 2 * i) & 0x7C00) == 0x7C00) {
        fail(b, "retained token " + std::to_string(i / d) + ", channel " + std::to_string(i % d) +
                    " is not finite; expected a finite half");
      }
    }
  }
}

}  // namespace veloxquant::minicache
