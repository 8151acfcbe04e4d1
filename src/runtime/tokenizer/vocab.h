// The vocabulary of a GGUF tokenizer: token texts, scores and types, and text -> id lookup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace veloxquant {

class GgufFile;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : uint8_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

class Vocab {
 public:
  // Reads tokenizer.ggml.tokens, .scores (float32 or int32; optional, 0 when absent) and
  // .token_type (int32; optional, Normal when absent). Throws FormatError naming the key when a
  // key has the wrong type, an array's length differs from the token count, a type is not one of
  // the values above, or two tokens share a text. An empty text is renamed "[EMPTY_<id>]", as
  // llama.cpp does, so that it cannot match text.
  static Vocab from_gguf(const GgufFile& file);

  size_t size() const { return text_.size(); }
  bool contains(int64_t id) const { return id >= 0 && static_cast<uint64_t>(id) < text_.size(); }
  // REQUIRES: contains(id) for the three below.
  const std::string& text(int32_t id) const { return text_[id]; }
  float score(int32_t id) const { return score_[id]; }
  TokenType type(int32_t id) const { return type_[id]; }
  void set_type(int32_t id, TokenType t) { type_[id] = t; }

  // The id whose text is exactly `t`, or -1.
  int32_t find(std::string_view t) const;
  // The id of the byte-fallback token "<0xXX>" (upper-case hex) of `byte`, or -1.
  int32_t byte_token(uint8_t byte) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::vector<std::string> text_;
  std::vector<float> score_;
  std::vector<TokenType> type_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
};

}  // namespace veloxquant
