// Tokenizer::from_gguf and load: the tokenizer.ggml.* metadata, with llama.cpp's defaults.
#include <optional>
#include <string>

#include "runtime/tokenizer/special_tokens.h"
#include "runtime/tokenizer/tokenizer_impl.h"
#include "veloxquant/gguf.h"

namespace veloxquant {

namespace {

std::string key_error(std::string_view key, const std::string& what) {
  return "metadata key '" + std::string(key) + "': " + what;
}

// A token id key: `fallback` when absent, -1 when it holds -1 or 0xFFFFFFFF (how converters write
// "none"), and FormatError when it is not an integer or not an id of the vocabulary.
int32_t read_token_id(const GgufFile& file, std::string_view key, int32_t fallback,
                      const Vocab& vocab) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return vocab.contains(fallback) ? fallback : -1;
  const std::optional<int64_t> id = v->as_integer();
  if (!id) {
    throw FormatError(key_error(key, std::string("expected an integer token id, found ") +
                                         gguf_value_type_name(v->type())));
  }
  if (*id == -1 || *id == 0xFFFFFFFF) return -1;
  if (!vocab.contains(*id)) {
    throw FormatError(key_error(key, "token id " + std::to_string(*id) + " is out of range; "
                                     "expected 0.." + std::to_string(vocab.size() - 1) +
                                     " (the size of tokenizer.ggml.tokens)"));
  }
  return static_cast<int32_t>(*id);
}

bool read_flag(const GgufFile& file, std::string_view key, bool fallback) {
  return file.find(key) == nullptr ? fallback : file.get<bool>(key);
}

// Byte tokens must spell their byte, since that is how their piece is found.
void check_byte_tokens(const Vocab& vocab) {
  const auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
  };
  for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
    if (vocab.type(id) != TokenType::Byte) continue;
    const std::string& t = vocab.text(id);
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || !hex(t[3]) || !hex(t[4]) || t[5] != '>') {
      throw FormatError(key_error("tokenizer.ggml.token_type",
                                  "token " + std::to_string(id) + " \"" + t +
                                      "\" has type byte; expected a text of the form <0xXX>"));
    }
  }
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  auto impl = std::make_unique<Impl>();
  // The kind and pre-tokenizer are checked first, so that an unsupported one is reported before
  // the vocabulary is read.
  const std::string& model = file.get<std::string>("tokenizer.ggml.model");
  if (model == "llama") {
    impl->kind = TokenizerKind::SentencePiece;
  } else if (model == "gpt2") {
    impl->kind = TokenizerKind::BytePairEncoding;
    const char* pre_key = "tokenizer.ggml.pre";
    const bool has_pre = file.find(pre_key) != nullptr;
    impl->pre = pre_tokenizer_config(has_pre ? file.get<std::string>(pre_key) : "");
  } else if (model == "gemma4") {
    // llama.cpp gives this model its own pre-tokenizer, whatever tokenizer.ggml.pre says.
    impl->kind = TokenizerKind::BytePairEncoding;
    impl->pre = pre_tokenizer_config("gemma4");
  } else {
    throw FormatError(key_error("tokenizer.ggml.model",
                                "unsupported tokenizer '" + model +
                                    "'; supported: llama (SentencePiece), gpt2 (byte-level BPE), "
                                    "gemma4 (SentencePiece-style BPE)"));
  }
  const bool spm = impl->kind == TokenizerKind::SentencePiece;

  impl->vocab = Vocab::from_gguf(file);
  Vocab& vocab = impl->vocab;
  check_byte_tokens(vocab);
  if (!spm) impl->merges = BpeMerges::from_gguf(file);

  // llama.cpp's defaults: <unk>, <s>, </s> at 0, 1, 2 for SentencePiece; none for BPE, where
  // llama.cpp's GPT-2 leftover (id 11) is not worth copying.
  impl->unk = read_token_id(file, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, vocab);
  impl->bos = read_token_id(file, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, vocab);
  impl->eos = read_token_id(file, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, vocab);
  std::vector<int32_t> declared_end = {impl->eos};
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
                          "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id",
                          "tokenizer.ggml.fim_sep_token_id"}) {
    declared_end.push_back(read_token_id(file, key, -1, vocab));
  }
  // Padding and separator ids are not read: nothing here uses them, and some converted models
  // store a padding id one past the vocabulary, which llama.cpp too only warns about.

  impl->add_bos = impl->pre.add_bos == AddBos::Always ||
                  read_flag(file, "tokenizer.ggml.add_bos_token",
                            spm || impl->pre.add_bos == AddBos::DefaultYes);
  impl->add_eos = read_flag(file, "tokenizer.ggml.add_eos_token", false);
  impl->add_space_prefix = read_flag(file, "tokenizer.ggml.add_space_prefix", spm);

  impl->end_of_generation = find_end_of_generation_tokens(vocab, declared_end);
  impl->specials = special_tokens_by_length(vocab);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::string& path) {
  const GgufFile file = GgufFile::open(path);
  try {
    return from_gguf(file);
  } catch (const FormatError& e) {
    throw FormatError(path + ": " + e.what());
  }
}

}  // namespace veloxquant
