// VecInfer on the GPU: keys as product-VQ indices of the smoothed, rotated key (one byte per
// sub-space), scored through a table of the query's products with every centroid; values as
// turboquant_mse's records, appended and read by TurboQuant's code. The tables are the
// calibration artifact's (VecinferTables), counted once per sequence as the CPU cache counts them:
// every KV head's smoothing factors and fp16 codebooks, the key rotation's signs, and the value
// codec's rotation and levels.
#include <cmath>
#include <memory>

#include "cuda/cache/device_format.h"
#include "cuda/common/device_array.cuh"
#include "cuda/turboquant/turboquant_launch.h"
#include "cuda/vecinfer/vecinfer_launch.h"
#include "cuda/vecinfer/vecinfer_rules.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

DeviceArray<float> upload(const std::vector<float>& host) {
  return DeviceArray<float>(host.data(), host.size());
}

// A rotation's bytes as the CPU's Rotation counts them: its sign bits, or the f32 matrix.
size_t rotation_bytes(size_t dim, size_t matrix_floats) {
  return matrix_floats ? sizeof(float) * matrix_floats : (dim + 7) / 8;
}

class VecinferFormat final : public DeviceFormat {
 public:
  VecinferFormat(const CacheConfig& c, const VecinferTables& t)
      : dim_(c.head_dim),
        bits_(c.bits),
        subspaces_(c.head_dim / t.dims),
        centroids_(t.centroids),
        key_state_(rotation_bytes(dim_, t.key_rotation.size()) +
                   c.kv_heads * (4 * dim_ + 2 * dim_ * t.centroids)),
        value_state_(rotation_bytes(dim_, t.values.value_rotation.size()) +
                     sizeof(float) * t.values.value_centroids.size()),
        key_signs_(upload(t.key_signs)),
        key_rotation_(upload(t.key_rotation)),
        smooth_(upload(t.smooth)),
        codebooks_(upload(t.codebooks)),
        value_signs_(upload(t.values.value_signs)),
        value_rotation_(upload(t.values.value_rotation)),
        value_bounds_(upload(t.values.value_boundaries)),
        value_levels_(upload(t.values.value_centroids)) {}

  size_t key_code_bytes(size_t n) const override { return n * subspaces_; }
  size_t value_code_bytes(size_t n) const override { return n * turboquant_value_record(dim_, bits_); }
  size_t shared_bytes(bool key) const override { return key ? key_state_ : value_state_; }
  void append(const AppendParams& p, int batch, cudaStream_t s) const override {
    launch_vecinfer_key_append(p, batch, keys(), s);
    TurboQuantDevice values{};
    values.value_signs = value_signs_.ptr, values.value_rotation = value_rotation_.ptr;
    values.value_boundaries = value_bounds_.ptr, values.hadamard_scale = hadamard_scale();
    launch_turboquant_append(p, batch, static_cast<int>(bits_), values, s, /*values_only=*/true);
  }
  SplitKernel split_kernel(AttendParams& p) const override {
    p.format.set(VecinferArgs{keys(), value_levels_.ptr});
    return vecinfer_split_kernel(p, static_cast<int>(bits_));
  }
  const float* value_signs() const override { return value_signs_.ptr; }
  const float* value_matrix() const override { return value_rotation_.ptr; }

 private:
  float hadamard_scale() const { return 1.0f / std::sqrt(static_cast<float>(dim_)); }
  VecinferDevice keys() const {
    return {key_signs_.ptr,
            key_rotation_.ptr,
            smooth_.ptr,
            codebooks_.ptr,
            hadamard_scale(),
            static_cast<int>(subspaces_),
            static_cast<int>(centroids_)};
  }

  size_t dim_;
  unsigned bits_;
  size_t subspaces_, centroids_;
  size_t key_state_, value_state_;
  DeviceArray<float> key_signs_, key_rotation_, smooth_, codebooks_;  // one of the rotation's pair is empty
  DeviceArray<float> value_signs_, value_rotation_, value_bounds_, value_levels_;
};

std::unique_ptr<DeviceFormat> make(const CacheConfig& c) {
  if (tables_of<VecinferTables>(c) == nullptr) {
    throw Error(
        "cuda cache: vecinfer needs its calibration artifact on the GPU as on the CPU: run "
        "`veloxquant calibrate -m MODEL -f TEXT --kv vecinfer -o DIR` and add artifacts=DIR to the spec");
  }
  if (const std::string problem = vecinfer_problem(c); !problem.empty())
    throw Error("cuda cache: " + problem);
  return std::make_unique<VecinferFormat>(c, *tables_of<VecinferTables>(c));
}

}  // namespace

VQ_DEVICE_FORMAT(vecinfer, "vecinfer", make);

}  // namespace veloxquant::cuda
