// The state behind veloxquant::Tokenizer, shared by its loading and its encoding code.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/vocab.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant {

struct Tokenizer::Impl {
  TokenizerKind kind = TokenizerKind::SentencePiece;
  Vocab vocab;
  std::optional<BpeMerges> merges;  // BytePairEncoding only
  PreTokenizerConfig pre;           // BytePairEncoding only

  int32_t bos = -1;
  int32_t eos = -1;
  int32_t unk = -1;
  bool add_bos = false;
  bool add_eos = false;
  // SentencePiece: one space before the text (and after every special token in it); both
  // kinds: the space the decoder removes again.
  bool add_space_prefix = false;

  std::vector<int32_t> specials;           // matched in the input, longest text first
  std::vector<int32_t> end_of_generation;  // sorted
};

}  // namespace veloxquant
