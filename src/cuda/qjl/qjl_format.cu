// QJL on the GPU: keys as the signs of a Gaussian sketch (each group's outlier channels sketched
// apart) plus norms, values as KIVI's per-token codes, the newest tokens in fp16 rings. The
// sketch lives in device memory twice, transposed: in f32 for the append's products and in fp16,
// in the attention kernel's pair order, for the MMA operands of the outlier columns.
#include <cuda_fp16.h>

#include <cmath>
#include <memory>
#include <numbers>

#include "cuda/common/device_array.cuh"
#include "cuda/kivi/kivi_values_format.h"
#include "cuda/qjl/qjl_launch.h"
#include "cuda/qjl/qjl_layout.cuh"
#include "cuda/qjl/qjl_rules.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

static_assert(kQjlProj == size_t(qjl::kProj) && kQjlOutlierProj == size_t(qjl::kOutlierProj));

class QjlFormat final : public KiviValuesFormat {
 public:
  QjlFormat(const CacheConfig& c, const QjlTables& t)
      : KiviValuesFormat(int(c.group), qjl::KeyLayout{int(t.outliers), int(c.group)}.block_bytes(),
                         {int(c.head_dim), int(c.bits), int(t.value_group)}),
        keys_{int(t.outliers), int(c.group)},
        sketch_floats_(t.sketch.size()) {
    // A step's threads read adjacent floats of S^T; within each 32 rows of the fp16 copy, pair j
    // holds rows j and j + 16.
    const size_t d = c.head_dim, proj = t.proj;
    std::vector<float> transposed(d * proj);
    std::vector<uint16_t> transposed_f16(d * proj);
    for (size_t r = 0; r < proj; ++r)
      for (size_t col = 0; col < d; ++col) {
        transposed[col * proj + r] = t.sketch[r * d + col];
        const size_t at = r / 32 * 32 + r % 16 * 2 + r % 32 / 16;
        transposed_f16[col * proj + at] = __half_as_ushort(__float2half_rn(t.sketch[r * d + col]));
      }
    sketch_t_ = DeviceArray<float>(transposed.data(), transposed.size());
    sketch_t_f16_ = DeviceArray<uint16_t>(transposed_f16.data(), transposed_f16.size());
    // The CPU codec's float expressions for the estimator's weights.
    const int no = keys_.outliers;
    const float half_pi = static_cast<float>(std::sqrt(std::numbers::pi / 2));
    args_ = QjlArgs{sketch_t_.ptr, sketch_t_f16_.ptr, keys_.group, no, values_.group,
                    std::sqrt(static_cast<float>(int(d) - no)) * half_pi / static_cast<float>(t.proj),
                    std::sqrt(static_cast<float>(no)) * half_pi / static_cast<float>(t.outlier_proj)};
  }
  size_t shared_bytes(bool key) const override { return key ? sketch_floats_ * sizeof(float) : 0; }
  void append(const AppendParams& p, int batch, cudaStream_t s) const override {
    launch_qjl_append(p, batch, values_.bits, QjlDevice{sketch_t_.ptr, keys_.group, keys_.outliers, values_.group}, s);
  }
  SplitKernel split_kernel(AttendParams& p) const override {
    p.format.set(args_);
    return qjl_split_kernel(p, values_.bits);
  }

 private:
  qjl::KeyLayout keys_;
  size_t sketch_floats_;
  DeviceArray<float> sketch_t_;  // S^T, head_dim x proj
  DeviceArray<uint16_t> sketch_t_f16_;
  QjlArgs args_;
};

std::unique_ptr<DeviceFormat> make(const CacheConfig& c) {
  if (const std::string problem = qjl_problem(c); !problem.empty()) throw Error("cuda cache: " + problem);
  return std::make_unique<QjlFormat>(c, *tables_of<QjlTables>(c));
}

}  // namespace

VQ_DEVICE_FORMAT(qjl, "qjl", make);

}  // namespace veloxquant::cuda
