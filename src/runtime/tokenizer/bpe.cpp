#include "runtime/tokenizer/bpe.h"

#include <optional>
#include <utility>

#include "runtime/tokenizer/pair_merge.h"
#include "runtime/tokenizer/unicode.h"
#include "veloxquant/gguf.h"

namespace veloxquant {

namespace {

constexpr const char* kMergesKey = "tokenizer.ggml.merges";

// The word's bytes written in GPT-2's byte alphabet.
std::string byte_encode(std::string_view word) {
  std::string out;
  out.reserve(word.size() * 2);
  for (const char c : word) {
    unicode::append_utf8(out, unicode::byte_to_codepoint(static_cast<uint8_t>(c)));
  }
  return out;
}

// Whether `word` may become its vocabulary entry without merging.
bool whole_word(WholeWords rule, std::string_view word) {
  switch (rule) {
    case WholeWords::Never:
      return false;
    case WholeWords::Always:
      return true;
    case WholeWords::NewlineRuns:
      return word.find_first_not_of('\n') == std::string_view::npos;
  }
  return false;
}

}  // namespace

size_t BpeMerges::PairHash::operator()(const std::pair<std::string, std::string>& p) const {
  const size_t a = std::hash<std::string>{}(p.first);
  return a ^ (std::hash<std::string>{}(p.second) + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
}

BpeMerges BpeMerges::from_gguf(const GgufFile& file) {
  const auto& array = file.get<GgufValue::Array>(kMergesKey);
  if (array.element_type != GgufValueType::String) {
    throw FormatError(std::string("metadata key '") + kMergesKey +
                      "': expected an array of string, found an array of " +
                      gguf_value_type_name(array.element_type));
  }
  BpeMerges m;
  m.ranks_.reserve(array.items.size());
  for (size_t i = 0; i < array.items.size(); ++i) {
    const std::string& entry = array.items[i].as<std::string>(kMergesKey);
    // The first character may itself be a space, so the separator is searched from index 1.
    const size_t space = entry.find(' ', 1);
    if (space == std::string::npos) {
      throw FormatError(std::string("metadata key '") + kMergesKey + "': entry " +
                        std::to_string(i) + " \"" + entry +
                        "\" is not two tokens separated by a space");
    }
    m.ranks_.emplace(std::make_pair(entry.substr(0, space), entry.substr(space + 1)),
                     static_cast<int>(i));
  }
  return m;
}

int BpeMerges::rank(std::string_view left, std::string_view right) const {
  const auto it = ranks_.find(std::make_pair(std::string(left), std::string(right)));
  return it == ranks_.end() ? -1 : it->second;
}

void bpe_tokenize(const Vocab& vocab, const BpeMerges& merges, const PreTokenizerConfig& config,
                  std::string_view text, std::vector<int32_t>& out) {
  const bool byte_level = !config.sentencepiece_style;
  for (std::string& raw : pre_tokenize(config.kind, text)) {
    const std::string word = byte_level ? byte_encode(raw) : std::move(raw);
    if (whole_word(config.whole_words, word)) {
      if (const int32_t id = vocab.find(word); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    const auto rank = [&](std::string_view left, std::string_view right) -> std::optional<double> {
      const int r = merges.rank(left, right);
      if (r < 0) return std::nullopt;
      return -static_cast<double>(r);  // the lowest rank merges first
    };
    for (const std::string_view piece : merge_adjacent_pairs(word, rank)) {
      if (const int32_t id = vocab.find(piece); id >= 0) {
        out.push_back(id);
        continue;
      }
      for (size_t i = 0; i < piece.size(); ++i) {
        const int32_t id = byte_level ? vocab.find(piece.substr(i, 1))
                                      : vocab.byte_token(static_cast<uint8_t>(piece[i]));
        if (id >= 0) out.push_back(id);
      }
    }
  }
}

}  // namespace veloxquant
