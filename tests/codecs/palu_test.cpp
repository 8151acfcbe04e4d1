// Palu (Chang et al., ICLR 2025, arXiv 2407.21118), adapted to bases fitted at prefill: a group's
// shared basis recovers a planted subspace and is stored once; the hi-bit latents are the leading
// singular directions; the Walsh-Hadamard transform is folded into the basis; attention in latent
// space equals decode-then-compute; the byte formula; corrupt codes and states; parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec_test_helpers.h"
#include "codecs/palu/palu_basis.h"
#include "codecs/palu/palu_codec.h"
#include "core/half_bytes.h"
#include "core/rng.h"
#include "core/rotation.h"
#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"
#include "veloxquant/tensor.h"

namespace veloxquant::palu {
namespace {

using test::sq_error;

// The key codec of a palu spec for a layer of `heads` KV heads of head_dim d.
std::unique_ptr<Codec> key_codec(const std::string& spec, size_t heads, size_t d) {
  return find_method("palu").make(parse_spec(spec).params, LayerShape{heads, d, 0, 0}).key;
}
const PaluCodec& as_palu(const Codec& c) { return dynamic_cast<const PaluCodec&>(c); }

// [n, heads, d]: head h's vectors lie in the span of the `rank` rows of dirs (orthonormal rows,
// [*, d] row-major) starting at row dir_first[h], with the leading `strong` directions 100x larger.
std::vector<float> planted(size_t n, size_t heads, size_t d, const std::vector<float>& dirs,
                           const std::vector<size_t>& dir_first, size_t rank, size_t strong, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n * heads * d, 0.0f);
  for (size_t t = 0; t < n; ++t)
    for (size_t h = 0; h < heads; ++h)
      for (size_t k = 0; k < rank; ++k) {
        const double a = rng.normal() * (k < strong ? 100.0 : 1.0) / (1.0 + 0.05 * static_cast<double>(k));
        const float* u = dirs.data() + (dir_first[h] + k) * d;
        for (size_t c = 0; c < d; ++c) x[(t * heads + h) * d + c] += static_cast<float>(a * u[c]);
      }
  return x;
}

// Head h of x ([n, heads, d]) as [n, d].
std::vector<float> head_rows(const std::vector<float>& x, size_t n, size_t heads, size_t d, size_t h) {
  std::vector<float> out(n * d);
  for (size_t t = 0; t < n; ++t) std::copy_n(x.data() + (t * heads + h) * d, d, out.data() + t * d);
  return out;
}

std::vector<float> round_trip(const Codec& c, const std::vector<float>& x, size_t n) {
  std::vector<uint8_t> codes(c.code_bytes(n));
  c.encode(x.data(), n, codes.data());
  std::vector<float> y(x.size());
  c.decode(codes.data(), n, y.data());
  return y;
}

double norm2(const std::vector<float>& x) { return sq_error(x, std::vector<float>(x.size(), 0.0f)); }

// |u - B_cols B_cols^T u| for a unit vector u and the columns [first, first + count) of a basis
// ([d][rank]): 0 when u lies in their span.
double outside_span(const float* u, const std::vector<float>& basis, size_t d, size_t rank, size_t first,
                    size_t count) {
  std::vector<double> rest(u, u + d);
  for (size_t j = first; j < first + count; ++j) {
    double dot = 0;
    for (size_t c = 0; c < d; ++c) dot += basis[c * rank + j] * static_cast<double>(u[c]);
    for (size_t c = 0; c < d; ++c) rest[c] -= dot * basis[c * rank + j];
  }
  double s = 0;
  for (double v : rest) s += v * v;
  return std::sqrt(s);
}

// G-LRD: the heads of a group share one basis fitted to all their vectors. Heads 0-1 live in one
// rank-16 subspace and heads 2-3 in another: with group=2 each group's basis recovers its
// subspace and 8-bit latents reconstruct every head almost exactly; one basis for all four
// (group=4) cannot hold both subspaces in rank 16.
TEST(Palu, GroupBasisRecoversThePlantedSubspaceOfItsHeads) {
  const size_t n = 200, heads = 4, d = 128, rank = 16;
  const std::vector<float> dirs = random_orthogonal(d, 3);
  const std::vector<float> x = planted(n, heads, d, dirs, {0, 0, rank, rank}, rank, 0, 5);
  const std::string exact = "palu:rank_ratio=0.125,hi_fraction=1,hi_bits=8,lo_bits=8,group=";
  for (const size_t group : {2, 4}) {
    const auto proto = key_codec(exact + std::to_string(group), heads, d);
    ASSERT_EQ(as_palu(*proto).config().rank, rank);
    const auto states = proto->fit_streams(x.data(), n, heads);
    for (size_t h = 0; h < heads; ++h) {
      const auto codec = proto->with_states(states, h);
      const std::vector<float> xh = head_rows(x, n, heads, d, h);
      const double rel = sq_error(xh, round_trip(*codec, xh, n)) / norm2(xh);
      if (group == 2) {
        EXPECT_LT(rel, 1e-4) << "head " << h;
        for (size_t k = 0; k < rank; ++k) {
          EXPECT_LT(outside_span(dirs.data() + ((h / 2) * rank + k) * d, as_palu(*codec).basis(), d, rank, 0, rank), 2e-3)
              << "head " << h << ", planted direction " << k;
        }
      } else {
        EXPECT_GT(rel, 0.1) << "head " << h;
      }
    }
  }
}

// One basis per group, in the state of the group's first head; the group is clamped to the KV
// heads and the last group takes what is left. Every head of a group decodes with the same basis.
TEST(Palu, GroupSharesOneBasisStoredOnce) {
  const size_t n = 40, d = 16;
  struct Case { size_t heads, group; std::vector<bool> stores; };
  for (const Case& c : {Case{4, 2, {true, false, true, false}}, Case{4, 3, {true, false, false, true}},
                        Case{2, 4, {true, false}}, Case{3, 1, {true, true, true}}}) {
    Rng rng(c.heads * 10 + c.group);
    std::vector<float> x(n * c.heads * d);
    for (float& v : x) v = static_cast<float>(rng.normal());
    const auto proto = key_codec("palu:group=" + std::to_string(c.group), c.heads, d);
    const auto states = proto->fit_streams(x.data(), n, c.heads);
    ASSERT_EQ(states.size(), c.heads);
    EXPECT_EQ(proto->stream_state_bytes(), 2 * d * 8u);  // rank 8 of 16, fp16
    EXPECT_EQ(proto->state_bytes(), 0u);
    std::vector<std::unique_ptr<Codec>> codecs;
    for (size_t h = 0; h < c.heads; ++h) {
      EXPECT_EQ(states[h].size(), c.stores[h] ? proto->stream_state_bytes() : 0u)
          << c.heads << " heads, group " << c.group << ", head " << h;
      codecs.push_back(proto->with_states(states, h));
    }
    for (size_t h = 0; h < c.heads; ++h) {
      size_t leader = h;
      while (!c.stores[leader]) --leader;
      EXPECT_EQ(as_palu(*codecs[h]).basis(), as_palu(*codecs[leader]).basis()) << "head " << h;
    }
  }
}

// The hi-bit part holds the leading singular directions: on vectors whose 4 leading directions
// are 100x the other 12, the basis's first hi = round(0.25 * 16) = 4 columns span exactly them,
// with or without the Hadamard transform (which rotates within a part). With 8 hi bits and 1 lo
// bit, the strong directions come back almost exactly and the weak ones coarsely.
TEST(Palu, HiBitLatentsAreTheLeadingSingularDirections) {
  const size_t n = 300, d = 64, rank = 16, hi = 4;
  const std::vector<float> dirs = random_orthogonal(d, 7);
  const std::vector<float> x = planted(n, 1, d, dirs, {0}, rank, hi, 9);
  for (const char* hadamard : {"true", "false"}) {
    const auto proto = key_codec(std::string("palu:rank_ratio=0.25,hi_fraction=0.25,hi_bits=8,lo_bits=1,hadamard=") + hadamard, 1, d);
    ASSERT_EQ(as_palu(*proto).config().hi, hi);
    const auto codec = proto->with_states(proto->fit_streams(x.data(), n, 1), 0);
    const std::vector<float>& basis = as_palu(*codec).basis();
    for (size_t k = 0; k < hi; ++k) {
      EXPECT_LT(outside_span(dirs.data() + k * d, basis, d, rank, 0, hi), 2e-3) << "strong direction " << k << ", hadamard " << hadamard;
    }
    for (size_t k = hi; k < rank; ++k) {
      EXPECT_GT(outside_span(dirs.data() + k * d, basis, d, rank, 0, hi), 0.99) << "weak direction " << k;
      EXPECT_LT(outside_span(dirs.data() + k * d, basis, d, rank, hi, rank - hi), 2e-3) << "weak direction " << k;
    }
    // Error along the strong directions (8 bits) against the weak ones (1 bit), per unit of energy.
    const std::vector<float> y = round_trip(*codec, x, n);
    double err[2] = {0, 0}, energy[2] = {0, 0};
    for (size_t t = 0; t < n; ++t)
      for (size_t k = 0; k < rank; ++k) {
        double px = 0, py = 0;
        for (size_t c = 0; c < d; ++c) px += dirs[k * d + c] * static_cast<double>(x[t * d + c]), py += dirs[k * d + c] * static_cast<double>(y[t * d + c]);
        err[k >= hi] += (px - py) * (px - py);
        energy[k >= hi] += px * px;
      }
    EXPECT_LT(err[0] / energy[0], 1e-4) << "hadamard " << hadamard;
    EXPECT_GT(err[1] / energy[1], 1e-2) << "hadamard " << hadamard;
  }
}

// Palu folds the Walsh-Hadamard transform into its projection: the basis with the transform is
// the basis without it, each part's columns multiplied by the (block) Hadamard matrix, up to the
// fp16 rounding of the stored basis. The part sizes here (10 and 30 of rank 40, head_dim 80) are
// not powers of two: 8 + 2 and 16 + 8 + 4 + 2 blocks.
TEST(Palu, HadamardIsFoldedIntoTheBasisOfEachPart) {
  const size_t n = 100, d = 80;
  const SyntheticKV w = make_synthetic_kv(n, 1, d, 1, 1, 11);
  const auto with = key_codec("palu:hadamard=true", 1, d), without = key_codec("palu:hadamard=false", 1, d);
  const PaluConfig& cfg = as_palu(*with).config();
  ASSERT_EQ(cfg.rank, 40u);
  ASSERT_EQ(cfg.hi, 10u);
  const auto h = with->with_states(with->fit_streams(w.keys.data(), n, 1), 0);
  const auto p = without->with_states(without->fit_streams(w.keys.data(), n, 1), 0);
  for (size_t c = 0; c < d; ++c) {
    std::vector<float> row(as_palu(*p).basis().begin() + static_cast<std::ptrdiff_t>(c * cfg.rank),
                           as_palu(*p).basis().begin() + static_cast<std::ptrdiff_t>((c + 1) * cfg.rank));
    hadamard_blocks(row.data(), cfg.hi);
    hadamard_blocks(row.data() + cfg.hi, cfg.rank - cfg.hi);
    for (size_t j = 0; j < cfg.rank; ++j) ASSERT_NEAR(row[j], as_palu(*h).basis()[c * cfg.rank + j], 2e-3) << "channel " << c << ", latent " << j;
  }
  // hadamard_blocks is orthonormal and its own inverse for sizes that are not powers of two.
  std::vector<float> v(30), u;
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 2.5f;
  u = v;
  hadamard_blocks(u.data(), u.size());
  EXPECT_NEAR(norm2(u), norm2(v), 1e-3);
  EXPECT_GT(sq_error(u, v), 1.0);
  hadamard_blocks(u.data(), u.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(u[i], v[i], 1e-5);
}

// score() projects each query once and dots it with the dequantized latents; accumulate() sums
// latents and projects back once: both equal decode-then-compute (the Codec defaults) within
// float rounding, over more tokens than one chunk, at head_dim 128, 80 and 8.
TEST(Palu, LatentAttentionEqualsDecodeThenCompute) {
  for (const size_t d : {128, 80, 8}) {
    const size_t n = 300, nq = 3;
    const SyntheticKV w = make_synthetic_kv(n, 1, d, nq, 1, d);
    for (const bool keys : {true, false}) {
      const std::vector<float>& x = keys ? w.keys : w.values;
      const auto proto = key_codec("palu", 1, d);
      const auto codec = proto->with_states(proto->fit_streams(x.data(), n, 1), 0);
      std::vector<uint8_t> codes(codec->code_bytes(n));
      codec->encode(x.data(), n, codes.data());
      Rng rng(d);
      std::vector<float> q(nq * d), wt(nq * n);
      for (float& v : q) v = static_cast<float>(rng.normal());
      for (float& v : wt) v = static_cast<float>(rng.uniform()) / static_cast<float>(n);
      std::vector<float> s(nq * n), s_ref(nq * n), o(nq * d, 0.5f), o_ref(nq * d, 0.5f);
      codec->score(q.data(), nq, codes.data(), n, s.data());
      codec->Codec::score(q.data(), nq, codes.data(), n, s_ref.data());
      codec->accumulate(wt.data(), nq, codes.data(), n, o.data());
      codec->Codec::accumulate(wt.data(), nq, codes.data(), n, o_ref.data());
      const double scale = std::sqrt(norm2(q) * norm2(x) / static_cast<double>(nq * n));
      for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(s[i], s_ref[i], 1e-5 * scale) << "score " << i << ", head_dim " << d;
      const double vscale = std::sqrt(norm2(x) / static_cast<double>(n));
      for (size_t i = 0; i < o.size(); ++i) ASSERT_NEAR(o[i], o_ref[i], 1e-5 * vscale) << "sum " << i << ", head_dim " << d;
      EXPECT_TRUE(codec->fused_score() && codec->fused_accumulate());
    }
  }
}

// Prefill's frame: a token decodes there to its latents (in units of unit()) in the first rank
// columns, all that basis_width() says it writes, and keeps its products with the queries.
TEST(Palu, PrefillFrameHoldsTheLatentsAndKeepsProducts) {
  for (const size_t d : {128, 80}) {
    const size_t n = 200, nq = 3;
    const SyntheticKV w = make_synthetic_kv(n, 1, d, nq, 1, d);
    const auto proto = key_codec("palu", 1, d);
    const auto codec = proto->with_states(proto->fit_streams(w.keys.data(), n, 1), 0);
    const size_t r = as_palu(*codec).config().rank;
    ASSERT_TRUE(codec->decodes_in_basis());
    ASSERT_EQ(codec->basis_width(), r);
    std::vector<uint8_t> codes(codec->code_bytes(n));
    codec->encode(w.keys.data(), n, codes.data());
    const std::vector<float> in_frame = test::expect_frame_keeps_products(*codec, w.queries, nq, codes, n);
    std::vector<float> latents(n * r);
    as_palu(*codec).latents(codes.data(), n, latents.data());
    for (size_t t = 0; t < n; ++t)
      for (size_t j = 0; j < r; ++j) ASSERT_EQ(in_frame[t * d + j], latents[t * r + j]) << "token " << t;
  }
}

// Fewer tokens than the rank: the directions the tokens span come first (one token: its own
// direction), the rest is completed by standard axes, orthonormal and the same on every fit; the
// fitted tokens round-trip almost exactly at 8 bits. All-zero tokens give the first standard axes.
TEST(Palu, FewTokensCompleteTheBasisDeterministically) {
  const size_t d = 32;
  const std::string exact = "palu:hi_fraction=1,hi_bits=8,lo_bits=8,hadamard=false";
  const auto proto = key_codec(exact, 1, d);  // rank 16
  Rng rng(13);
  std::vector<float> x(3 * d);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (const size_t n : {1, 3}) {
    const auto states = proto->fit_streams(x.data(), n, 1);
    EXPECT_EQ(states, proto->fit_streams(x.data(), n, 1));
    const auto codec = proto->with_states(states, 0);  // refuses bases that are not orthonormal
    const std::vector<float> part(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n * d));
    EXPECT_LT(sq_error(part, round_trip(*codec, part, n)), 1e-4 * norm2(part)) << n << " tokens";
    if (n == 1) {
      const std::vector<float>& b = as_palu(*codec).basis();
      const double len = std::sqrt(norm2(part));
      for (size_t c = 0; c < d; ++c) EXPECT_NEAR(std::fabs(b[c * 16]), std::fabs(x[c]) / len, 1e-3);
    }
  }
  const std::vector<float> zeros(4 * d, 0.0f);
  const auto codec = proto->with_states(proto->fit_streams(zeros.data(), 4, 1), 0);
  for (size_t c = 0; c < d; ++c)
    for (size_t j = 0; j < 16; ++j) EXPECT_EQ(as_palu(*codec).basis()[c * 16 + j], c == j ? 1.0f : 0.0f);
}

// code_bytes = tokens x (fp16 min + step per non-empty part, each part's codes padded to a byte).
TEST(Palu, CodeBytesMatchTheFormula) {
  struct Case { std::string spec; size_t d, rank, hi; unsigned hb, lb; };
  for (const Case& c : {Case{"palu", 128, 64, 16, 4, 2}, Case{"palu", 80, 40, 10, 4, 2}, Case{"palu", 8, 4, 1, 4, 2},
                        Case{"palu:rank_ratio=1,hi_fraction=0", 64, 64, 0, 4, 2},
                        Case{"palu:rank_ratio=0.3,hi_fraction=1,hi_bits=3", 96, 29, 29, 3, 2},
                        Case{"palu:rank_ratio=0.01,hi_bits=8,lo_bits=1", 16, 1, 0, 8, 1}}) {
    const auto codec = key_codec(c.spec, 1, c.d);
    const PaluConfig& cfg = as_palu(*codec).config();
    EXPECT_EQ(cfg.rank, c.rank) << c.spec << ", head_dim " << c.d;
    EXPECT_EQ(cfg.hi, c.hi) << c.spec << ", head_dim " << c.d;
    const size_t grids = (c.hi > 0) + (c.rank > c.hi);
    const size_t token = 4 * grids + (c.hi * c.hb + 7) / 8 + ((c.rank - c.hi) * c.lb + 7) / 8;
    EXPECT_EQ(codec->code_bytes(1), token) << c.spec << ", head_dim " << c.d;
    EXPECT_EQ(codec->code_bytes(37), 37 * token);
    EXPECT_EQ(codec->block_tokens(), 1u);
    EXPECT_EQ(codec->stream_state_bytes(), 2 * c.d * c.rank);
  }
  // The defaults at head_dim 128: 8 B of grids, 16 x 4 bits, 48 x 2 bits = 28 B a token.
  EXPECT_EQ(key_codec("palu", 1, 128)->code_bytes(1), 28u);
}

// Codes from a session file: a negative or NaN step, an infinite minimum are refused with an
// Error naming the block (token) and the grid; what encode() wrote passes, zeros included.
TEST(Palu, CorruptCodesAreRefused) {
  const size_t d = 64, n = 4;
  const SyntheticKV w = make_synthetic_kv(n, 1, d, 1, 1, 17);
  const auto proto = key_codec("palu", 1, d);
  const auto codec = proto->with_states(proto->fit_streams(w.keys.data(), n, 1), 0);
  std::vector<uint8_t> good(codec->code_bytes(n));
  codec->encode(w.keys.data(), n, good.data());
  EXPECT_NO_THROW(codec->check_codes(good.data(), n));
  EXPECT_NO_THROW(proto->check_codes(good.data(), n));  // the checks need no basis
  const size_t token = codec->code_bytes(1);
  auto expect_refused = [&](size_t offset, uint16_t value, const std::string& grid) {
    std::vector<uint8_t> bad = good;
    store_half(bad.data() + token + offset, value);
    try {
      codec->check_codes(bad.data(), n);
      ADD_FAILURE() << grid << " accepted " << value;
    } catch (const Error& e) {
      for (const std::string& part : {std::string("block 1"), grid}) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      }
    }
  };
  expect_refused(2, 0xBC00, "hi-bit");  // step -1
  expect_refused(2, 0x7E00, "hi-bit");  // step NaN
  expect_refused(4, 0xFC00, "lo-bit");  // minimum -inf
  expect_refused(6, 0x7C00, "lo-bit");  // step +inf
  std::vector<uint8_t> zero_codes(codec->code_bytes(n));
  const std::vector<float> zeros(n * d, -0.0f);
  codec->encode(zeros.data(), n, zero_codes.data());
  EXPECT_NO_THROW(codec->check_codes(zero_codes.data(), n));
}

// States from a session file: with_states() refuses a head without a state, a basis of the
// wrong size, a state where the group shares its first head's, and a basis that is not finite,
// leaves [-1, 1] or is not orthonormal, naming the head.
TEST(Palu, CorruptStatesAreRefused) {
  const size_t n = 50, heads = 2, d = 16, rank = 8;
  Rng rng(19);
  std::vector<float> x(n * heads * d);
  for (float& v : x) v = static_cast<float>(rng.normal());
  const auto proto = key_codec("palu:group=2", heads, d);
  const auto good = proto->fit_streams(x.data(), n, heads);
  EXPECT_NO_THROW(proto->with_states(good, 1));
  auto expect_refused = [&](std::vector<std::vector<uint8_t>> states, size_t head, const std::string& what) {
    try {
      proto->with_states(states, head);
      ADD_FAILURE() << what << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_refused(good, 2, "2 states for KV head 2");
  auto shorter = good;
  shorter[0].pop_back();
  expect_refused(shorter, 1, "KV head 0: 255 bytes; expected 256");
  auto extra = good;
  extra[1] = good[0];
  expect_refused(extra, 0, "KV head 1: 256 bytes; expected 0 (it shares the basis of KV head 0)");
  auto with_entry = [&](size_t channel, size_t latent, uint16_t value) {
    auto s = good;
    store_half(s[0].data() + 2 * (channel * rank + latent), value);
    return s;
  };
  expect_refused(with_entry(3, 2, 0x7E00), 1, "basis entry (channel 3, latent 2) is nan");
  expect_refused(with_entry(3, 2, 0x3E00), 1, "basis entry (channel 3, latent 2) is 1.5");
  auto scaled = good;  // column 5 times 1.01: still within [-1, 1], no longer unit
  for (size_t c = 0; c < d; ++c) {
    uint8_t* p = scaled[0].data() + 2 * (c * rank + 5);
    store_half(p, f32_to_f16(f16_to_f32(load_half(p)) * 1.01f));
  }
  expect_refused(scaled, 0, "basis columns 5 and 5");
  auto twins = good;  // column 6 a copy of column 1
  for (size_t c = 0; c < d; ++c) std::memcpy(twins[0].data() + 2 * (c * rank + 6), twins[0].data() + 2 * (c * rank + 1), 2);
  expect_refused(twins, 0, "basis columns 1 and 6");
  // The prototype holds no basis: it reports sizes but does not encode.
  std::vector<uint8_t> codes(proto->code_bytes(1));
  EXPECT_THROW(proto->encode(x.data(), 1, codes.data()), Error);
}

// In a cache: the prompt fits one basis per group of KV heads (group=2 of 4 heads: states on
// heads 0 and 2 only, counted once in the bytes), and planted low-rank keys and values come back
// almost exactly at 8 bits while the fp16 window keeps the newest tokens.
TEST(Palu, CacheFitsOneBasisPerGroupAtPrefill) {
  const size_t n = 300, heads = 4, d = 64, rank = 16;
  const std::vector<float> dirs = random_orthogonal(d, 23);
  const std::vector<float> k = planted(n, heads, d, dirs, {0, 0, rank, rank}, rank, 0, 29);
  const std::vector<float> v = planted(n, heads, d, dirs, {2 * rank, 2 * rank, 3 * rank, 3 * rank}, rank, 0, 31);
  KVCache cache("palu:rank_ratio=0.25,hi_fraction=1,hi_bits=8,lo_bits=8,group=2", LayerShape{heads, d, 0, 0});
  cache.append(TensorView::f32(k.data(), {n, heads, d}), TensorView::f32(v.data(), {n, heads, d}));
  for (const auto* streams : {&cache.key_streams(), &cache.value_streams()}) {
    size_t bytes = 0;
    for (size_t h = 0; h < heads; ++h) {
      const CacheStream& s = (*streams)[h];
      EXPECT_EQ(s.state.size(), h % 2 == 0 ? 2 * d * rank : 0u) << "head " << h;
      EXPECT_EQ(s.encoded, n - 128);
      bytes += s.state.size() + s.codes.size() + s.tail.size();
    }
    EXPECT_EQ(bytes, streams == &cache.key_streams() ? cache.key_bytes() : cache.value_bytes());
  }
  EXPECT_LT(sq_error(k, cache.decode_keys()), 1e-4 * norm2(k));
  EXPECT_LT(sq_error(v, cache.decode_values()), 1e-4 * norm2(v));
}

// Bad parameters are SpecErrors naming the parameter.
TEST(Palu, BadParametersAreNamed) {
  const LayerShape shape{2, 128, 0, 0};
  test::expect_refused_naming("palu:rank_ratio=0", "rank_ratio", shape);
  test::expect_refused_naming("palu:rank_ratio=1.5", "rank_ratio", shape);
  test::expect_refused_naming("palu:hi_fraction=-0.1", "hi_fraction", shape);
  test::expect_refused_naming("palu:hi_bits=0", "hi_bits", shape);
  test::expect_refused_naming("palu:hi_bits=9", "hi_bits", shape);
  test::expect_refused_naming("palu:lo_bits=0", "lo_bits", shape);
  test::expect_refused_naming("palu:hi_bits=2,lo_bits=4", "lo_bits", shape);
  test::expect_refused_naming("palu:group=0", "group", shape);
  test::expect_refused_naming("palu:hadamard=maybe", "hadamard", shape);
  EXPECT_NO_THROW(KVCache("palu:rank_ratio=1,hi_fraction=0,hi_bits=8,lo_bits=8,group=256,hadamard=false,residual=0", shape));
}

}  // namespace
}  // namespace veloxquant::palu
