#include "runtime/tokenizer/vocab.h"

#include <cstdio>

#include "veloxquant/gguf.h"

namespace veloxquant {

namespace {

constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";

// The items of array `key`, checked to be `count` of `element` type (any count if count is 0).
const std::vector<GgufValue>& array_items(const GgufFile& file, const char* key,
                                          std::initializer_list<GgufValueType> element_types,
                                          size_t count) {
  const auto& array = file.get<GgufValue::Array>(key);
  bool type_ok = false;
  std::string expected;
  for (GgufValueType t : element_types) {
    type_ok = type_ok || array.element_type == t;
    expected += expected.empty() ? "" : " or ";
    expected += gguf_value_type_name(t);
  }
  if (!type_ok) {
    throw FormatError(std::string("metadata key '") + key + "': expected an array of " +
                      expected + ", found an array of " +
                      gguf_value_type_name(array.element_type));
  }
  if (count != 0 && array.items.size() != count) {
    throw FormatError(std::string("metadata key '") + key + "': expected " +
                      std::to_string(count) + " entries, one per token in " + kTokensKey +
                      ", found " + std::to_string(array.items.size()));
  }
  return array.items;
}

}  // namespace

Vocab Vocab::from_gguf(const GgufFile& file) {
  Vocab v;
  const auto& tokens = array_items(file, kTokensKey, {GgufValueType::String}, 0);
  if (tokens.empty()) throw FormatError(std::string("metadata key '") + kTokensKey + "' is empty");
  const size_t n = tokens.size();
  if (n > static_cast<size_t>(INT32_MAX)) {
    throw FormatError(std::string("metadata key '") + kTokensKey + "': " + std::to_string(n) +
                      " tokens do not fit 32-bit ids");
  }
  v.text_.reserve(n);
  v.ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string t = tokens[i].as<std::string>(kTokensKey);
    if (t.empty()) t = "[EMPTY_" + std::to_string(i) + "]";
    const auto [it, inserted] = v.ids_.emplace(t, static_cast<int32_t>(i));
    if (!inserted) {
      throw FormatError(std::string("metadata key '") + kTokensKey + "': tokens " +
                        std::to_string(it->second) + " and " + std::to_string(i) +
                        " have the same text \"" + t + "\"; expected distinct texts");
    }
    v.text_.push_back(std::move(t));
  }

  v.score_.assign(n, 0.0f);
  if (file.find(kScoresKey) != nullptr) {
    const auto& scores =
        array_items(file, kScoresKey, {GgufValueType::Float32, GgufValueType::Int32}, n);
    for (size_t i = 0; i < n; ++i) {
      v.score_[i] = scores[i].is<float>() ? scores[i].as<float>(kScoresKey)
                                          : static_cast<float>(scores[i].as<int32_t>(kScoresKey));
    }
  }

  v.type_.assign(n, TokenType::Normal);
  if (file.find(kTypesKey) != nullptr) {
    const auto& types = array_items(file, kTypesKey, {GgufValueType::Int32}, n);
    for (size_t i = 0; i < n; ++i) {
      const int32_t t = types[i].as<int32_t>(kTypesKey);
      if (t < 0 || t > static_cast<int32_t>(TokenType::Byte)) {
        throw FormatError(std::string("metadata key '") + kTypesKey + "': token " +
                          std::to_string(i) + " has type " + std::to_string(t) +
                          ", expected 0..6 (undefined, normal, unknown, control, user-defined, "
                          "unused, byte)");
      }
      v.type_[i] = static_cast<TokenType>(t);
    }
  }
  return v;
}

int32_t Vocab::find(std::string_view t) const {
  const auto it = ids_.find(t);
  return it == ids_.end() ? -1 : it->second;
}

int32_t Vocab::byte_token(uint8_t byte) const {
  char text[8];
  std::snprintf(text, sizeof text, "<0x%02X>", byte);
  return find(text);
}

}  // namespace veloxquant
