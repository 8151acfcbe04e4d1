// TurboQuant on the GPU (turboquant_mse, turboquant_prod, turboquant_rvq): rotated Lloyd-Max
// codes with a norm per token (a Hadamard rotation with random signs, or a dense orthogonal matrix
// at head sizes that are not powers of two), turboquant_prod's sign bits of the keys' sketched
// residual, turboquant_rvq's two stages in one code that indexes their joint table (its attention
// is turboquant_mse's). The rotations, codebooks and sketch are the CPU codecs'
// (TurboQuantTables), counted once per sequence as the CPU codecs count them.
#include <cmath>
#include <memory>

#include "cuda/cache/device_format.h"
#include "cuda/common/device_array.cuh"
#include "cuda/turboquant/turboquant_launch.h"
#include "cuda/turboquant/turboquant_rules.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

DeviceArray<float> upload(const std::vector<float>& host) { return DeviceArray<float>(host.data(), host.size()); }

class TurboQuantFormat final : public DeviceFormat {
 public:
  TurboQuantFormat(const CacheConfig& c, const TurboQuantTables& t, TurboQuantKind kind)
      : prod_(kind == TurboQuantKind::Prod),
        dim_(c.head_dim),
        bits_(c.bits),
        key_state_(state_bytes(t.key_rotation.size(), codebook_floats(t, true))),
        value_state_(state_bytes(t.value_rotation.size(), codebook_floats(t, false))),
        key_signs_(upload(t.key_signs)),
        value_signs_(upload(t.value_signs)),
        key_rotation_(upload(t.key_rotation)),
        value_rotation_(upload(t.value_rotation)),
        key_bounds_(upload(t.key_boundaries)),
        value_bounds_(upload(t.value_boundaries)),
        key_levels_(upload(t.key_centroids)),
        value_levels_(upload(t.value_centroids)),
        stage1_levels_(upload(t.stage1_levels)),
        stage1_bounds_(upload(t.stage1_boundaries)),
        stage2_bounds_(upload(t.stage2_boundaries)),
        stage_scale_(t.stage_scale) {
    if (prod_) {
      // Transposed, so that the kernels' threads (one per sketch row) read adjacent floats.
      std::vector<float> transposed(dim_ * dim_);
      for (size_t r = 0; r < dim_; ++r)
        for (size_t col = 0; col < dim_; ++col) transposed[col * dim_ + r] = t.key_sketch[r * dim_ + col];
      key_sketch_ = upload(transposed);
    }
  }
  // A norm (prod keys: two) and bits per coordinate (prod keys: bits - 1 code bits and a sign).
  size_t key_code_bytes(size_t n) const override { return n * ((prod_ ? 8 : 4) + dim_ * bits_ / 8); }
  size_t value_code_bytes(size_t n) const override { return n * (4 + dim_ * bits_ / 8); }
  size_t shared_bytes(bool key) const override { return key ? key_state_ : value_state_; }
  void append(const AppendParams& p, int batch, cudaStream_t s) const override {
    launch_turboquant_append(p, batch, static_cast<int>(bits_),
                             TurboQuantDevice{key_signs_.ptr, value_signs_.ptr, key_rotation_.ptr,
                                              value_rotation_.ptr, key_bounds_.ptr, value_bounds_.ptr,
                                              key_levels_.ptr, key_sketch_.ptr,
                                              1.0f / std::sqrt(static_cast<float>(dim_)), stage1_levels_.ptr,
                                              stage1_bounds_.ptr, stage2_bounds_.ptr, stage_scale_},
                             s);
  }
  SplitKernel split_kernel(AttendParams& p) const override {
    p.format.set(TurboQuantArgs{key_levels_.ptr, value_levels_.ptr, key_signs_.ptr, key_rotation_.ptr,
                                key_sketch_.ptr});
    return turboquant_split_kernel(p, static_cast<int>(bits_), prod_);
  }
  const float* value_signs() const override { return value_signs_.ptr; }
  const float* value_matrix() const override { return value_rotation_.ptr; }

 private:
  // The rotation (sign bits, or the f32 matrix as the CPU's Rotation keeps it) and the f32
  // codebook (and prod's f32 sketch) of one stream kind.
  size_t state_bytes(size_t matrix_floats, size_t floats) const {
    return (matrix_floats ? sizeof(float) * matrix_floats : (dim_ + 7) / 8) + sizeof(float) * floats;
  }
  // The floats a stream's codebooks take on the CPU: its levels (and prod's sketch), or
  // turboquant_rvq's two stage codebooks, not the joint table built from them.
  static size_t codebook_floats(const TurboQuantTables& t, bool key) {
    if (!t.stage1_levels.empty()) return 2 * t.stage1_levels.size();
    return key ? t.key_centroids.size() + t.key_sketch.size() : t.value_centroids.size();
  }

  bool prod_;
  size_t dim_;
  unsigned bits_;
  size_t key_state_, value_state_;
  DeviceArray<float> key_signs_, value_signs_, key_rotation_, value_rotation_;  // one pair is empty
  DeviceArray<float> key_bounds_, value_bounds_, key_levels_, value_levels_;
  DeviceArray<float> key_sketch_;                                     // prod: S^T; empty otherwise
  DeviceArray<float> stage1_levels_, stage1_bounds_, stage2_bounds_;  // rvq; empty otherwise
  float stage_scale_;
};

template <TurboQuantKind KIND>
std::unique_ptr<DeviceFormat> make(const CacheConfig& c) {
  if (const std::string problem = turboquant_problem(c, KIND); !problem.empty())
    throw Error("cuda cache: " + problem);
  return std::make_unique<TurboQuantFormat>(c, *tables_of<TurboQuantTables>(c), KIND);
}

}  // namespace

VQ_DEVICE_FORMAT(turboquant_mse, "turboquant_mse", make<TurboQuantKind::Mse>);
VQ_DEVICE_FORMAT(turboquant_prod, "turboquant_prod", make<TurboQuantKind::Prod>);
VQ_DEVICE_FORMAT(turboquant_rvq, "turboquant_rvq", make<TurboQuantKind::Rvq>);

}  // namespace veloxquant::cuda
