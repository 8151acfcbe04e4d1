// The fp16 cache on the GPU: every token's key and value as fp16 rows, the like-for-like baseline.
#include <memory>

#include "cuda/cache/device_format.h"
#include "cuda/fp16/fp16_launch.h"

namespace veloxquant::cuda {
namespace {

class Fp16Format final : public DeviceFormat {
 public:
  explicit Fp16Format(const CacheConfig& c) : row_bytes_(c.head_dim * 2) {}
  size_t key_code_bytes(size_t n) const override { return n * row_bytes_; }
  size_t value_code_bytes(size_t n) const override { return n * row_bytes_; }
  void append(const AppendParams& p, int batch, cudaStream_t s) const override { launch_fp16_append(p, batch, s); }
  SplitKernel split_kernel(AttendParams& p) const override { return fp16_split_kernel(p); }

 private:
  size_t row_bytes_;
};

std::unique_ptr<DeviceFormat> make(const CacheConfig& c) { return std::make_unique<Fp16Format>(c); }

}  // namespace

VQ_DEVICE_FORMAT(fp16, "fp16", make);

}  // namespace veloxquant::cuda
