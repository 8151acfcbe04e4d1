// Trains a byte-level BPE vocabulary ("gpt2" in GGUF) on text: the words of a pre-tokenizer are
// counted, then the most frequent adjacent pair of symbols is merged until the vocabulary is
// full. The merges are exactly the ones bpe_tokenize applies, so a trained vocabulary encodes the
// text it was trained on the way it was counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/tokenizer/pre_tokenizer.h"
#include "veloxquant/gguf.h"

namespace veloxquant {

// Word frequencies of a corpus, word by word as the pre-tokenizer splits it.
class BpeWordCounts {
 public:
  // pre_name: a tokenizer.ggml.pre value (see pre_tokenizer_config); FormatError if unknown,
  // Error if it is SentencePiece-style (gemma4), since the trainer writes byte-level BPE.
  explicit BpeWordCounts(std::string pre_name);
  // Counts the words of `text`. Text may be fed in pieces; a word cut by a piece boundary is
  // counted as two words, which for training on paragraphs changes nothing that matters.
  void add(std::string_view text);
  const std::string& pre_name() const { return pre_name_; }
  const std::unordered_map<std::string, uint64_t>& counts() const { return counts_; }

 private:
  std::string pre_name_;
  PreTokenizer pre_;
  std::unordered_map<std::string, uint64_t> counts_;
};

struct BpeTrainerOptions {
  size_t vocab_size = 4096;  // special tokens + 256 byte tokens + merges
  // Control tokens placed first (ids 0, 1, ...), e.g. BOS and EOS.
  std::vector<std::string> special_tokens = {"<s>", "</s>"};
  // Pairs seen fewer times than this are never merged, even if the vocabulary is not full.
  uint64_t min_pair_count = 2;
};

struct TrainedBpe {
  std::string pre_name;              // tokenizer.ggml.pre
  std::vector<std::string> tokens;  // in GPT-2's byte alphabet, as tokenizer.ggml.tokens
  std::vector<int32_t> token_types;  // llama.cpp's token types: control for the special tokens
  std::vector<std::string> merges;   // "left right", rank order
};

// Throws Error if vocab_size does not exceed the special and byte tokens, or a special token is
// empty or repeated.
TrainedBpe train_bpe(const BpeWordCounts& words, const BpeTrainerOptions& options);

// The tokenizer.ggml.* metadata of a trained vocabulary: model "gpt2", its pre-tokenizer, the
// first special token as BOS (added to every encoded text) and the second as EOS, where present.
std::vector<std::pair<std::string, GgufValue>> bpe_tokenizer_metadata(const TrainedBpe& bpe);

}  // namespace veloxquant
