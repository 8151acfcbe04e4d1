#include <fmt/format.h>

#include <limits>

#include "veloxquant/gguf.h"

namespace veloxquant {
namespace {

// Strings are shown quoted with control bytes escaped; long ones are cut to keep one line.
std::string quote(const std::string& s) {
  constexpr size_t kMaxChars = 64;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxChars; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (s.size() > kMaxChars) out += fmt::format("...({} bytes)", s.size());
  return out;
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::UInt8: return "uint8";
    case GgufValueType::Int8: return "int8";
    case GgufValueType::UInt16: return "uint16";
    case GgufValueType::Int16: return "int16";
    case GgufValueType::UInt32: return "uint32";
    case GgufValueType::Int32: return "int32";
    case GgufValueType::Float32: return "float32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::UInt64: return "uint64";
    case GgufValueType::Int64: return "int64";
    case GgufValueType::Float64: return "float64";
  }
  return "unknown";
}

GgufValue GgufValue::array(GgufValueType element_type, std::vector<GgufValue> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].type() != element_type) {
      throw Error(fmt::format("GGUF array of {}: item {} is a {}", gguf_value_type_name(element_type),
                              i, gguf_value_type_name(items[i].type())));
    }
  }
  return GgufValue(Array{element_type, std::move(items)});
}

GgufValueType GgufValue::type() const {
  return std::visit([](const auto& v) { return type_of<std::decay_t<decltype(v)>>(); }, v_);
}

std::optional<int64_t> GgufValue::as_integer() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_same_v<T, uint64_t>) {
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          }
          return static_cast<int64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      v_);
}

void GgufValue::throw_type_mismatch(std::string_view context, GgufValueType expected) const {
  throw FormatError(fmt::format("{}: expected {}, found {}", context, gguf_value_type_name(expected),
                                gguf_value_type_name(type())));
}

std::string GgufValue::to_string(size_t max_items) const {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return quote(v);
        } else if constexpr (std::is_same_v<T, Array>) {
          std::string out = fmt::format("[{} x {}]", gguf_value_type_name(v.element_type),
                                        v.items.size());
          if (v.items.empty()) return out;
          out += " [";
          for (size_t i = 0; i < v.items.size() && i < max_items; ++i)
            out += (i ? ", " : "") + v.items[i].to_string(max_items);
          return out + (v.items.size() > max_items ? ", ...]" : "]");
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
          return fmt::format("{}", static_cast<int>(v));  // a number, not a character
        } else {
          return fmt::format("{}", v);
        }
      },
      v_);
}

bool GgufValue::operator==(const GgufValue& other) const {
  if (v_.index() != other.v_.index()) return false;
  return std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        const T& b = std::get<T>(other.v_);
        if constexpr (std::is_same_v<T, Array>) {
          return a.element_type == b.element_type && a.items == b.items;
        } else {
          return a == b;
        }
      },
      v_);
}

}  // namespace veloxquant
