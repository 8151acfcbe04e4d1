// VecInfer keys (Yao et al., arXiv 2510.06175): a key k is smoothed and rotated, y = R (k / lambda)
// (key_transform.h), and y is cut into dim / dims sub-vectors of dims coordinates; sub-vector s is
// stored as the index of its nearest centroid in codebook s (product VQ). Codebooks and lambda
// are calibrated per KV head (vecinfer_fit.h) and shared by every token of the head: each stream
// keeps its head's tables as its state, so a session file carries what its codes index.
//
// Scores by asymmetric distance computation (ADC): per query, q' = R (lambda q) once, then a table
// of q'_s . c_sj for every sub-space s and centroid j; a key's score is the sum of its indices'
// table entries, dim / dims lookups, and keys are never decoded. decode() returns
// lambda R^T (c_s0 | c_s1 | ...), whose products with q are exactly these sums (up to rounding).
//
// Record of one token: dim / dims u8 centroid indices, sub-space order.
// Per stream (fit_streams): its KV head's lambda (dim f32) then codebooks (fp16, [dim / dims]
// [centroids][dims]). Shared per layer (state_bytes): the rotation's signs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/kmeans.h"
#include "core/rotation.h"
#include "veloxquant/codec.h"

namespace veloxquant::vecinfer {

// One KV head's calibrated tables.
struct HeadTables {
  std::vector<float> smooth;     // lambda, dim floats > 0
  std::vector<float> codebooks;  // [dim / dims][centroids][dims], fp16 values
};

class VecinferKeyCodec final : public Codec {
 public:
  // The prototype a layer's make() returns, holding every KV head's calibrated tables, which
  // fit_streams() hands to the streams. REQUIRES (checked by the method): dims divides dim, 1 <= centroids <= 256,
  // tables shaped as above.
  VecinferKeyCodec(size_t dim, size_t dims, size_t centroids, std::vector<HeadTables> heads);

  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * subspaces_; }
  size_t state_bytes() const override { return rotation_.state_bytes(); }

  // Nothing is fitted at prefill: each stream's state is its KV head's calibrated tables.
  bool fits_streams() const override { return true; }
  std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n, size_t heads) const override;
  // Refuses a state of another size, a smoothing factor that is not finite and > 0, and a
  // codebook entry that is not finite.
  std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states,
                                     size_t head) const override;
  size_t stream_state_bytes() const override { return 4 * dim_ + 2 * subspaces_ * centroids_ * dims_; }
  bool states_from_spec() const override { return true; }

  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses an index >= centroids (only possible below 256 centroids).
  void check_codes(const uint8_t* codes, size_t n) const override;
  bool fused_score() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const override;

  size_t subspaces() const { return subspaces_; }

 private:
  const HeadTables& tables(const char* what) const;  // this stream's; throws on the prototype

  size_t dim_, dims_, centroids_, subspaces_;
  Rotation rotation_;
  std::shared_ptr<const std::vector<HeadTables>> heads_;
  std::shared_ptr<const HeadTables> stream_;  // the stream's tables; null on the prototype
  // Over each sub-space's codebook of stream_, for encode; empty on the prototype.
  std::shared_ptr<const std::vector<CentroidSearch>> searches_;
};

}  // namespace veloxquant::vecinfer
