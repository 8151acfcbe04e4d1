// llama.cpp's BPE tokenizer: ranked merges within the words of a pre-tokenizer, over GPT-2's byte
// alphabet ("gpt2" vocabularies) or over UTF-8 with SentencePiece's spaces ("gemma4").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/vocab.h"

namespace veloxquant {

class GgufFile;

// tokenizer.ggml.merges: entry i, "left right", merges that pair with rank i (lower first).
class BpeMerges {
 public:
  // Throws FormatError naming the key if it is absent, not an array of strings, or an entry has
  // no space after its first character. A repeated pair keeps its first rank, as in llama.cpp.
  static BpeMerges from_gguf(const GgufFile& file);
  // The rank of merging `left` with `right`, or -1 if that pair is not a merge.
  int rank(std::string_view left, std::string_view right) const;

 private:
  struct PairHash {
    size_t operator()(const std::pair<std::string, std::string>& p) const;
  };
  std::unordered_map<std::pair<std::string, std::string>, int, PairHash> ranks_;
};

// Appends the ids of `text` to `out`. Each word of the pre-tokenizer (mapped byte by byte to the
// byte alphabet unless config.sentencepiece_style, in which case `text` must already have its
// spaces as U+2581) becomes its vocabulary entry if config.whole_words allows, or else is split
// into characters and merged pair by pair, lowest rank first and leftmost among equals. A final
// symbol that is not in the vocabulary falls back to its single bytes' entries (byte alphabet) or
// <0xXX> tokens (SentencePiece style); bytes without one are dropped, as llama.cpp drops them.
void bpe_tokenize(const Vocab& vocab, const BpeMerges& merges, const PreTokenizerConfig& config,
                  std::string_view text, std::vector<int32_t>& out);

}  // namespace veloxquant
