// Text <-> token ids from a GGUF file's tokenizer metadata, as llama.cpp tokenizes:
// SentencePiece-style ("llama": score-ordered merges, byte fallback), byte-level BPE ("gpt2":
// ranked merges after a pre-tokenizer chosen by tokenizer.ggml.pre) and Gemma 4's BPE over
// SentencePiece-style text ("gemma4").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace veloxquant {

class GgufFile;

enum class TokenizerKind { SentencePiece, BytePairEncoding };

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from the file: model ("llama", "gpt2" or "gemma4"), tokens, scores,
  // token_type, merges (BPE), pre (gpt2: the pre-tokenizers of llama.cpp's tokenizer suite, e.g.
  // default, gpt-2, llama-bpe, qwen2, qwen35, falcon, starcoder, command-r, deepseek-llm, and
  // their llama.cpp aliases), the bos, eos, unknown, eot, eom and fim_pad/rep/sep token ids
  // (0xFFFFFFFF or -1 meaning none) and the add_bos_token, add_eos_token and add_space_prefix
  // flags. Throws FormatError naming the key if the metadata is missing, inconsistent (e.g.
  // scores and tokens of different lengths, an id out of range, two tokens with one text) or of
  // a kind that is not supported (naming it and listing the supported ones).
  static Tokenizer from_gguf(const GgufFile& file);
  // The tokenizer of the GGUF file at `path`, which need hold no tensors: a vocabulary-only file
  // such as llama.cpp's models/ggml-vocab-*.gguf is enough. Its FormatErrors name the path.
  static Tokenizer load(const std::string& path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Token ids for `text` (any bytes; malformed UTF-8 is tolerated as llama.cpp tolerates it).
  // add_special adds what the vocabulary asks for, as llama.cpp's add_special: BOS first when
  // add_bos_token is true (default true for "llama" and the llama-3 family, false otherwise;
  // always for "gemma4") and the vocabulary has one, EOS last when add_eos_token is true
  // (default false). When parse_special is set, the text of control tokens (e.g.
  // "<|im_start|>") becomes that token; otherwise it is tokenized as plain text. User-defined
  // tokens always match their text.
  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special = false) const;
  // The text of one token as it should be printed: byte-fallback tokens become their byte,
  // SentencePiece's U+2581 becomes a space, byte-level BPE's byte alphabet is mapped back;
  // control, unknown and unused tokens print nothing, unless `special` is set (llama.cpp's
  // special), which prints control and unknown tokens as their text. Pieces may be partial
  // UTF-8; concatenate before displaying. Throws Error if the id is out of range.
  std::string token_to_piece(int32_t id, bool special = false) const;
  // The concatenated pieces. When `strip_leading_space` is set and the vocabulary adds a space
  // prefix (SentencePiece by default), the one leading space of the first non-empty piece is
  // removed, so decode(encode(s, b)) == s for text the vocabulary covers. llama.cpp's
  // llama_detokenize keeps that space after a BOS token; llama-cpp-python's detokenize, like this,
  // removes it. llama.cpp's clean-up of spaces before punctuation (clean_spaces) is not applied:
  // it loses information. Throws Error if an id is out of range.
  std::string decode(const std::vector<int32_t>& ids, bool strip_leading_space = true) const;

  TokenizerKind kind() const;
  size_t vocab_size() const;
  int32_t bos() const;  // -1 when the vocabulary has none
  int32_t eos() const;  // -1 when the vocabulary has none
  bool is_end_of_generation(int32_t id) const;  // EOS, EOT and similar; false if out of range
  const std::string& token_text(int32_t id) const;  // raw vocabulary entry; Error if out of range

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Length of the longest prefix of `text` that ends on a UTF-8 character boundary: token pieces
// may split a character, which is printed (or streamed) once it is complete.
size_t complete_utf8(std::string_view text);

}  // namespace veloxquant
