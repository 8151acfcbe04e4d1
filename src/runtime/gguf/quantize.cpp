// ggml's Q8_0 / Q4_0 quantizers, and dequantize() of every decodable type to f32.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/gguf/block_decoders.h"
#include "runtime/gguf/ggml_types.h"
#include "veloxquant/gguf.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

constexpr size_t kBlock = 32;  // elements per Q8_0 / Q4_0 block
constexpr size_t kQ8Bytes = 2 + kBlock;
constexpr size_t kQ4Bytes = 2 + kBlock / 2;

void check_quantize_input(std::span<const float> x, const char* type) {
  if (x.size() % kBlock != 0) {
    throw Error(fmt::format("quantize {}: {} values; expected a multiple of {}", type, x.size(),
                            kBlock));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      throw Error(fmt::format("quantize {}: value {} is {}; expected a finite value", type, i, x[i]));
    }
  }
}

void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

}  // namespace

bool ggml_type_decodable(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ||
         gguf::block_decoder(t) != nullptr;
}

void dequantize(GgmlType type, std::span<const uint8_t> data, std::span<float> out) {
  if (!ggml_type_decodable(type)) {
    throw FormatError(fmt::format("cannot decode ggml type {}; decodable: {}", ggml_type_name(type),
                                  gguf::decodable_type_names()));
  }
  const size_t n = out.size(), block = ggml_block_elements(type);
  if (n % block != 0 || data.size() != n / block * ggml_block_bytes(type)) {
    throw Error(fmt::format("dequantize {}: {} bytes for {} elements; expected {} elements in {} bytes",
                            ggml_type_name(type), data.size(), n, block,
                            ggml_block_bytes(type)));
  }
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out.data(), data.data(), n * 4);
      return;
    case GgmlType::F16:
    case GgmlType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data.data() + 2 * i, 2);
        out[i] = type == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    default: {
      const gguf::BlockDecoder decode = gguf::block_decoder(type);
      const size_t bytes = ggml_block_bytes(type);
      for (size_t b = 0; b < n / block; ++b) decode(data.data() + b * bytes, out.data() + b * block);
      return;
    }
  }
}

std::vector<uint8_t> quantize_q8_0(std::span<const float> x) {
  check_quantize_input(x, "q8_0");
  std::vector<uint8_t> out(x.size() / kBlock * kQ8Bytes);
  for (size_t b = 0; b < x.size() / kBlock; ++b) {
    const float* v = x.data() + b * kBlock;
    uint8_t* o = out.data() + b * kQ8Bytes;
    float amax = 0;
    for (size_t j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(v[j]));
    // ggml rounds with the f32 scale; only the stored copy of d is rounded to fp16.
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_f16(o, d);
    for (size_t j = 0; j < kBlock; ++j)
      o[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(v[j] * id)));
  }
  return out;
}

std::vector<uint8_t> quantize_q4_0(std::span<const float> x) {
  check_quantize_input(x, "q4_0");
  std::vector<uint8_t> out(x.size() / kBlock * kQ4Bytes);
  for (size_t b = 0; b < x.size() / kBlock; ++b) {
    const float* v = x.data() + b * kBlock;
    uint8_t* o = out.data() + b * kQ4Bytes;
    // The signed value of largest magnitude (the first one on ties) maps to code 0, i.e. -8 * d.
    float amax = 0, max = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      if (amax < std::fabs(v[j])) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    store_f16(o, d);
    // x * id lies in [-8, 8], so x * id + 8.5 truncates to 0..16 and 16 clamps to 15.
    auto code = [&](float xv) {
      return static_cast<uint8_t>(std::min(15, static_cast<int>(xv * id + 8.5f)));
    };
    for (size_t j = 0; j < kBlock / 2; ++j)
      o[2 + j] = static_cast<uint8_t>(code(v[j]) | (code(v[j + kBlock / 2]) << 4));
  }
  return out;
}

std::vector<uint8_t> encode_weights(GgmlType type, std::span<const float> x) {
  switch (type) {
    case GgmlType::F32: {
      std::vector<uint8_t> out(x.size_bytes());
      if (!x.empty()) std::memcpy(out.data(), x.data(), out.size());
      return out;
    }
    case GgmlType::F16:
    case GgmlType::BF16: {
      std::vector<uint8_t> out(x.size() * 2);
      for (size_t i = 0; i < x.size(); ++i) {
        const uint16_t h = type == GgmlType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      return out;
    }
    case GgmlType::Q8_0: return quantize_q8_0(x);
    case GgmlType::Q4_0: return quantize_q4_0(x);
    default:
      throw Error(fmt::format("cannot store weights as {}; expected f32, f16, bf16, q8_0 or q4_0",
                              ggml_type_name(type)));
  }
}

}  // namespace veloxquant
