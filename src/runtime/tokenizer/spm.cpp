#include "runtime/tokenizer/spm.h"

#include <cstdio>
#include <string>

#include "runtime/tokenizer/pair_merge.h"
#include "veloxquant/error.h"

namespace veloxquant {

namespace {

int32_t byte_token(const Vocab& vocab, uint8_t byte, int32_t unk) {
  int32_t id = vocab.byte_token(byte);
  // llama.cpp looks the byte up as a C string, so byte 0 has no such token.
  if (id < 0 && byte != 0) {
    id = vocab.find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
  }
  if (id < 0) id = unk;
  if (id < 0) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", byte);
    throw Error("SentencePiece tokenizer: byte " + std::string(hex) +
                " has no byte-fallback token and the vocabulary has no unknown token");
  }
  return id;
}

}  // namespace

void spm_tokenize(const Vocab& vocab, int32_t unk, std::string_view text,
                  std::vector<int32_t>& out) {
  const auto score = [&](std::string_view left, std::string_view right) -> std::optional<double> {
    // The pair is adjacent in `text`, so their concatenation is the view spanning both.
    const int32_t id = vocab.find(std::string_view(left.data(), left.size() + right.size()));
    if (id < 0) return std::nullopt;
    return vocab.score(id);
  };
  // Every merged symbol is a vocabulary entry, so only single characters can miss; llama.cpp's
  // re-segmentation of merge history therefore never applies and is not needed here.
  for (const std::string_view symbol : merge_adjacent_pairs(text, score)) {
    if (const int32_t id = vocab.find(symbol); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const char byte : symbol) {
      out.push_back(byte_token(vocab, static_cast<uint8_t>(byte), unk));
    }
  }
}

}  // namespace veloxquant
