// RaBitQ keys (Gao & Long, SIGMOD 2024): each KV head's keys are partitioned by an IVF of nlist
// k-means centroids fitted to the head's prompt keys (fit_streams). A key k is stored as its
// cluster j, the unit residual o = (k - c_j) / ||k - c_j|| rotated by a random orthogonal P
// (randomized Hadamard), and one sign bit per rotated coordinate: x = sign(P o) / sqrt(D), the
// quantized unit vector o_bar = P^T x.
//
// RaBitQ's estimator of an inner product with a unit query q is <o_bar, q> / <o_bar, o>: unbiased,
// and with probability about 1 - 2 exp(-c eps0^2) within
//   sqrt((1 - <o_bar, o>^2) / <o_bar, o>^2) * eps0 / sqrt(D - 1)
// of <o, q>. For attention, q . k = q . c_j + ||k - c_j|| <q, o> is estimated as
//   q . c_j + s * <x, P q>,   s = ||k - c_j|| / <o_bar, o>,   <o_bar, o> = ||P o||_1 / sqrt(D),
// so a record stores s, the sign bits and j, and a query is rotated once per call. decode()
// returns c_j + s o_bar, the vector whose inner products are exactly these estimates, so the
// decoded and the fused attention paths agree. In the rotated basis a key is P c_j + s x: the
// rotated centroids are kept beside the centroids, so prefill (attend_decoded) decodes without an
// inverse rotation per token.
//
// With nprobe lists (Codec::select), each query reads only the tokens of the nprobe lists whose
// centroids have the largest inner product with it, as an IVF search probes lists, and token 0
// (the attention sink, and a token for every query to read); score() gathers those tokens'
// records and writes kExcluded for the rest.
//
// Record of one token: f32 s | sign bits (D/8 bytes, pack_bits) | u8 cluster.
// Stream state (fit_streams): the nlist centroids, fp16, [nlist, D].
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codecs/common/packed_code_kernel.h"
#include "core/kmeans.h"
#include "core/rotation.h"
#include "veloxquant/codec.h"

namespace veloxquant::rabitq {

class RabitqKeyCodec final : public Codec {
 public:
  // The prototype make() returns: sizes only; encode, decode and score throw Error until
  // with_states() gives it centroids. REQUIRES (checked by the method): dim >= 2,
  // 1 <= nlist <= 256, nprobe <= nlist (0: every list).
  RabitqKeyCodec(size_t dim, size_t nlist, uint64_t rotation_seed, uint64_t cluster_seed, size_t nprobe = 0);

  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * format_.stride; }
  size_t state_bytes() const override { return rotation_.state_bytes(); }

  bool fits_streams() const override { return true; }
  // nlist k-means centroids per KV head, fitted to that head's keys.
  std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n, size_t heads) const override;
  std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states,
                                     size_t head) const override;
  size_t stream_state_bytes() const override { return nlist_ * dim_ * 2; }

  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses a cluster index >= nlist and a scale s that is negative, infinite or NaN.
  void check_codes(const uint8_t* codes, size_t n) const override;
  bool fused_score() const override { return true; }
  // Fewer lists than nlist probed.
  bool selects_tokens() const override { return nprobe_ > 0 && nprobe_ < nlist_; }
  void select(const float* q, size_t nq, const uint8_t* codes, size_t n, uint8_t* keep) const override;
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const override;
  // The rotated basis y = P k = P c_j + s x.
  bool decodes_in_basis() const override { return true; }
  void decode_in_basis(const uint8_t* codes, size_t n, float* y) const override;
  void to_basis(float* x, size_t n) const override { rotation_.forward(x, n); }
  void from_basis(float* x, size_t n) const override { rotation_.inverse(x, n); }

  size_t nlist() const { return nlist_; }
  // The fitted centroids, [nlist, dim] (fp16 values); empty on the prototype.
  const std::vector<float>& centroids() const { return centroids_; }

 private:
  void require_fitted(const char* what) const;
  // dots[i * nlist + j] = q_i . c_j.
  std::vector<float> centroid_dots(const float* q, size_t nq) const;
  // probed[j] = 1 for the nprobe lists of largest dots[j] (ties: the lower j), else 0.
  void probe(const float* dots, uint8_t* probed) const;
  // s x (x: the signs over sqrt(D)) plus the record's centroid: rotated back to the keys' space
  // (decode), or with the rotated centroid in P's basis (decode_in_basis).
  void decode_records(const uint8_t* codes, size_t n, float* x, bool in_basis) const;

  size_t dim_, nlist_, nprobe_;
  uint64_t cluster_seed_;
  Rotation rotation_;
  RecordFormat format_;
  size_t cluster_offset_;
  PackedCodeKernel signs_;  // 1-bit table {-1, +1}
  std::vector<float> centroids_;
  CentroidSearch search_;                 // over centroids_, for encode
  std::vector<float> rotated_centroids_;  // P c_j, [nlist, dim]
};

}  // namespace veloxquant::rabitq
