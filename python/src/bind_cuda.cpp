// veloxquant.DeviceCache: the CUDA backend's compressed cache of one layer, on GPU arrays passed
// through DLPack (torch, CuPy, JAX). Built only with the CUDA backend (VELOXQUANT_CUDA=1 pip
// install .); `veloxquant.cuda_available` says whether it is there.
#include <fmt/format.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace nb = nanobind;

namespace veloxquant::python {
namespace {

using GpuArray = nb::ndarray<nb::device::cuda>;

struct BoundDeviceCache {
  std::string spec;
  std::unique_ptr<cuda::DeviceCache> cache;
};

std::string describe(const GpuArray& a) {
  std::string shape;
  for (size_t i = 0; i < a.ndim(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape(i));
  return fmt::format("[{}] of {}-bit {}", shape, a.dtype().bits,
                     a.dtype().code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) ? "float" : "int");
}

// Checks that `a` is a C-contiguous GPU array of `bits`-bit `code` elements with the expected
// shape, and returns its data pointer; ShapeError naming `what` otherwise.
const void* checked(const GpuArray& a, const char* what, nb::dlpack::dtype_code code, uint8_t bits,
                    const std::vector<size_t>& shape) {
  bool ok = a.dtype().code == static_cast<uint8_t>(code) && a.dtype().bits == bits &&
            a.dtype().lanes == 1 && a.ndim() == shape.size();
  size_t stride = 1;
  for (size_t i = shape.size(); ok && i-- > 0;) {
    ok = a.shape(i) == shape[i] && (shape[i] == 1 || static_cast<size_t>(a.stride(i)) == stride);
    stride *= shape[i];
  }
  if (!ok) {
    std::string want;
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
    throw ShapeError(fmt::format("{}: got {}; expected a C-contiguous GPU array [{}] of {}-bit {}", what,
                                 describe(a), want, bits,
                                 code == nb::dlpack::dtype_code::Float ? "float" : "int"));
  }
  return a.data();
}

void* stream_of(uintptr_t stream) { return reinterpret_cast<void*>(stream); }

}  // namespace

void bind_cuda(nb::module_& m) {
  m.attr("cuda_available") = true;
  nb::class_<BoundDeviceCache>(
      m, "DeviceCache",
      "A layer's compressed KV cache in GPU memory, for a batch of sequences of equal length: "
      "quantize-on-append and fused decode attention straight from the codes (fp16, kivi with "
      "kbits == vbits, turboquant_mse and turboquant_prod with bits == vbits, qjl with its default "
      "sketches and vbits 2 or 4, vecinfer with its artifacts=; streaming_llm over any of them). Codes are "
      "byte for byte the CPU Cache's for "
      "the same spec, layer "
      "and seed (turboquant_prod and qjl: but for the rare key sign whose sketch product is within "
      "rounding of zero).")
      .def(
          "__init__",
          [](BoundDeviceCache* self, const std::string& spec, size_t batch, size_t kv_heads, size_t head_dim,
             size_t capacity, int layer, int layers, uint64_t seed) {
            const LayerShape shape{kv_heads, head_dim, layer, seed, layers};
            const Spec parsed = parse_spec(spec);
            auto cache = std::make_unique<cuda::DeviceCache>(
                cuda::device_cache_config(parsed, shape, batch, capacity));
            new (self) BoundDeviceCache{parsed.to_string(), std::move(cache)};
          },
          nb::arg("spec"), nb::kw_only(), nb::arg("batch"), nb::arg("kv_heads"), nb::arg("head_dim"),
          nb::arg("capacity"), nb::arg("layer") = 0, nb::arg("layers") = 1, nb::arg("seed") = 0,
          "capacity: the most tokens one sequence may hold (memory is reserved for them). Raises "
          "SpecError for a method the backend does not run, Error for an unsupported shape "
          "(head_dim 64 or 128; 80, 96 and 256 for fp16).")
      .def(
          "append",
          [](BoundDeviceCache& self, const GpuArray& k, const GpuArray& v, const GpuArray& positions,
             uintptr_t stream) {
            const cuda::CacheConfig& c = self.cache->config();
            const size_t n = k.ndim() == 4 ? k.shape(2) : 0;
            const std::vector<size_t> rows{c.batch, c.kv_heads, n, c.head_dim};
            const auto* kp = checked(k, "k", nb::dlpack::dtype_code::Float, 16, rows);
            const auto* vp = checked(v, "v", nb::dlpack::dtype_code::Float, 16, rows);
            const auto* pp = checked(positions, "positions", nb::dlpack::dtype_code::Int, 64, {c.batch, n});
            self.cache->append(static_cast<const uint16_t*>(kp), static_cast<const uint16_t*>(vp),
                               static_cast<const int64_t*>(pp), n, stream_of(stream));
          },
          nb::arg("k"), nb::arg("v"), nb::arg("positions"), nb::arg("stream") = 0,
          "Appends n tokens: k, v float16 [batch, kv_heads, n, head_dim] (keys as given: no RoPE "
          "applied), positions int64 [batch, n], all on the GPU. stream: a cudaStream_t as an int "
          "(torch.cuda.current_stream().cuda_stream); 0 is the default stream.")
      .def(
          "attend",
          [](BoundDeviceCache& self, const GpuArray& q, const GpuArray& out, uintptr_t stream) {
            const cuda::CacheConfig& c = self.cache->config();
            const size_t q_heads = q.ndim() == 3 ? q.shape(1) : 0;
            const auto* qp = checked(q, "q", nb::dlpack::dtype_code::Float, 16,
                                     {c.batch, q_heads, c.head_dim});
            auto* op = const_cast<void*>(
                checked(out, "out", nb::dlpack::dtype_code::Float, 32, {c.batch, q_heads, c.head_dim}));
            self.cache->attend(static_cast<const uint16_t*>(qp), q_heads, static_cast<float*>(op),
                               stream_of(stream));
          },
          nb::arg("q"), nb::arg("out"), nb::arg("stream") = 0,
          "One decode query per sequence: q float16 [batch, q_heads, head_dim] (q_heads a "
          "multiple of kv_heads, at most 8 per KV head) attends over every cached token; the "
          "float32 output is written to out, same shape. Scale 1/sqrt(head_dim). Asynchronous "
          "on `stream`.")
      .def(
          "finish_step", [](BoundDeviceCache& self) { self.cache->finish_step(); },
          "The end of a step, after its queries attended (Cache.finish_step): an evicting spec "
          "(streaming_llm) lets its oldest tokens past the budget go. No GPU work.")
      .def_prop_ro(
          "spec", [](const BoundDeviceCache& s) { return s.spec; }, "the canonical spec")
      .def_prop_ro(
          "tokens", [](const BoundDeviceCache& s) { return s.cache->tokens(); }, "tokens each sequence holds")
      .def_prop_ro(
          "nbytes", [](const BoundDeviceCache& s) { return s.cache->stored_bytes(); },
          "exact stored bytes of all sequences, counted like Cache.nbytes")
      .def_prop_ro(
          "attend_read_bytes", [](const BoundDeviceCache& s) { return s.cache->attend_read_bytes(); },
          "bytes one attend() reads from the cache")
      .def("__repr__", [](const BoundDeviceCache& s) {
        return fmt::format("<DeviceCache {} batch={} tokens={} nbytes={}>", s.spec, s.cache->config().batch,
                           s.cache->tokens(), s.cache->stored_bytes());
      });
}

}  // namespace veloxquant::python
