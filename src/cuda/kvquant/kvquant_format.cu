// kvquant_nuq on the GPU: the CPU codec's records (per-channel key levels, per-token value levels,
// a sparse part per vector), keys before RoPE, every token encoded on append. Each stream keeps
// its first token's fp16 rows as its state, as the CPU streams do; the calibrated tables are the
// artifact's, counted once per sequence as the CPU cache counts its codecs' tables.
#include <algorithm>
#include <memory>
#include <vector>

#include "cuda/cache/device_format.h"
#include "cuda/common/device_array.cuh"
#include "cuda/kvquant/kvquant_launch.h"
#include "cuda/kvquant/kvquant_rules.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

template <class T>
DeviceArray<T> upload(const std::vector<T>& host) {
  return DeviceArray<T>(host.data(), host.size());
}

// The keys' RoPE frequencies (the CPU's apply_rope ones), to turn each key to its position.
std::vector<double> rope_frequencies(const RopeParams& rope) {
  std::vector<double> f(std::max<size_t>(rope.dims / 2, 1), 0.0);
  for (size_t i = 0; i < rope.dims / 2; ++i) f[i] = rope_inverse_frequency(rope, i);
  return f;
}

class KvquantFormat final : public DeviceFormat {
 public:
  KvquantFormat(const CacheConfig& c, const KvquantTables& t)
      : dim_(c.head_dim),
        keys_(kvquant_record(c, t.outliers, t.sink, false)),
        values_(kvquant_record(c, t.outliers, t.sink, true)),
        key_levels_(upload(t.key_levels)),
        value_levels_(upload(t.value_levels)),
        key_lo_(upload(t.key_lo)),
        key_hi_(upload(t.key_hi)),
        inv_freq_(upload(rope_frequencies(c.rope))),
        rope_half_(static_cast<int>(c.rope.dims / 2)),
        stages_(kvquant_stages(c.head_dim, keys_, values_)),
        key_tables_(sizeof(float) * (t.key_levels.size() + t.key_lo.size() + t.key_hi.size())),
        value_tables_(sizeof(float) * t.value_levels.size()) {}

  size_t key_code_bytes(size_t n) const override { return n * keys_.bytes(); }
  size_t value_code_bytes(size_t n) const override { return n * values_.bytes(); }
  size_t shared_bytes(bool key) const override { return key ? key_tables_ : value_tables_; }
  size_t stream_state_bytes(bool /*key*/) const override { return keys_.sink ? 2 * dim_ : 0; }
  void append(const AppendParams& p, int batch, cudaStream_t s) const override {
    launch_kvquant_append(p, batch, side(true), side(false), s);
  }
  SplitKernel split_kernel(AttendParams& p) const override {
    p.format.set(KvquantArgs{side(true), side(false), inv_freq_.ptr, rope_half_, stages_});
    return kvquant_split_kernel(p);
  }

 private:
  KvquantSide side(bool key) const {
    const KvquantRecord& r = key ? keys_ : values_;
    KvquantSide s;
    s.levels = key ? key_levels_.ptr : value_levels_.ptr;
    s.lo = key ? key_lo_.ptr : nullptr, s.hi = key ? key_hi_.ptr : nullptr;
    s.bits = static_cast<int>(r.bits), s.outliers = static_cast<int>(r.outliers);
    s.slots = static_cast<int>(r.slots()), s.codes_offset = static_cast<int>(r.codes_offset());
    return s;
  }

  size_t dim_;
  KvquantRecord keys_, values_;
  DeviceArray<float> key_levels_, value_levels_, key_lo_, key_hi_;
  DeviceArray<double> inv_freq_;
  int rope_half_, stages_;
  size_t key_tables_, value_tables_;
};

std::unique_ptr<DeviceFormat> make(const CacheConfig& c) {
  if (tables_of<KvquantTables>(c) == nullptr) {
    throw Error(
        "cuda cache: kvquant_nuq needs its calibration artifact on the GPU as on the CPU: run "
        "`veloxquant calibrate -m MODEL -f TEXT --kv kvquant_nuq -o DIR` and add artifacts=DIR to the spec");
  }
  if (const std::string problem = kvquant_problem(c); !problem.empty()) throw Error("cuda cache: " + problem);
  return std::make_unique<KvquantFormat>(c, *tables_of<KvquantTables>(c));
}

}  // namespace

VQ_DEVICE_FORMAT(kvquant_nuq, "kvquant_nuq", make);

}  // namespace veloxquant::cuda
