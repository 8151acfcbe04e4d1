#include "manifest.h"

#include <array>

namespace veloxquant::dev {
namespace {

nlohmann::json json_value(const GgufValue& v) {
  switch (v.type()) {
    case GgufValueType::UInt8: return v.as<uint8_t>("");
    case GgufValueType::Int8: return v.as<int8_t>("");
    case GgufValueType::UInt16: return v.as<uint16_t>("");
    case GgufValueType::Int16: return v.as<int16_t>("");
    case GgufValueType::UInt32: return v.as<uint32_t>("");
    case GgufValueType::Int32: return v.as<int32_t>("");
    case GgufValueType::UInt64: return v.as<uint64_t>("");
    case GgufValueType::Int64: return v.as<int64_t>("");
    // Widened exactly; JSON's shortest round-trip printing keeps every bit of the float.
    case GgufValueType::Float32: return static_cast<double>(v.as<float>(""));
    case GgufValueType::Float64: return v.as<double>("");
    case GgufValueType::Bool: return v.as<bool>("");
    case GgufValueType::String: return v.as<std::string>("");
    case GgufValueType::Array: {
      nlohmann::json items = nlohmann::json::array();
      for (const GgufValue& item : v.as<GgufValue::Array>("").items) items.push_back(json_value(item));
      return items;
    }
  }
  return nullptr;
}

}  // namespace

uint32_t crc32(std::span<const uint8_t> data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t b : data) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

nlohmann::json manifest(const FixtureOptions& o, const Fixture& f) {
  nlohmann::json m;
  m["options"] = {{"arch", o.arch},
                  {"type", ggml_type_name(o.type)},
                  {"tied", o.tied},
                  {"seed", o.seed},
                  {"rope_scale", static_cast<double>(o.rope_scale)},
                  {"rope_scaling", o.rope_scaling}};
  m["metadata"] = nlohmann::json::array();
  for (const auto& [key, value] : f.metadata) {
    nlohmann::json entry = {{"key", key},
                            {"type", gguf_value_type_name(value.type())},
                            {"value", json_value(value)}};
    if (value.type() == GgufValueType::Array)
      entry["element_type"] = gguf_value_type_name(value.as<GgufValue::Array>("").element_type);
    m["metadata"].push_back(std::move(entry));
  }
  m["tensors"] = nlohmann::json::array();
  for (const auto& t : f.tensors) {
    m["tensors"].push_back({{"name", t.name},
                            {"type", ggml_type_name(t.type)},
                            {"dims", t.dims},
                            {"bytes", t.data.size()},
                            {"crc32", crc32(t.data)}});
  }
  return m;
}

}  // namespace veloxquant::dev
