// Small tokenizer vocabularies for fixture models, in the shapes llama.cpp's converters write:
// a SentencePiece one ("llama": control tokens, 256 byte-fallback tokens, scored pieces) and a
// byte-level BPE one ("gpt2" with pre-tokenizer "qwen2": GPT-2's byte alphabet plus ranked merges).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "veloxquant/gguf.h"

namespace veloxquant::dev {

// GGUF token types (llama.cpp's llama_token_type).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };

struct FixtureVocab {
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre; empty for SentencePiece
  std::vector<std::string> tokens;
  std::vector<float> scores;  // empty for BPE, whose merges carry the ranking
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // "left right", BPE only
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_bos = true;
};

FixtureVocab sentencepiece_vocab();
FixtureVocab byte_bpe_vocab();

// The tokenizer.ggml.* entries for `vocab`, in the order llama.cpp's gguf writer emits them.
std::vector<std::pair<std::string, GgufValue>> vocab_metadata(const FixtureVocab& vocab);

}  // namespace veloxquant::dev
