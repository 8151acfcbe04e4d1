// Fuzz target: the tokenizers, on the vocabularies the project has: the fixture SentencePiece and
// byte-level BPE vocabularies (tools/dev/fixture_vocab), the four BPE pre-tokenizer fixtures in
// tests/data/tokenizer and the real SentencePiece model stories260K (when present beside the
// project). The first input byte picks the tokenizer, the second what to do:
//  - encode the rest as text (any bytes, flags from the second byte): every id produced must be
//    in range and decode without error;
//  - decode the rest as little-endian int32 ids, out-of-range ones included: in-range ids decode,
//    and an out-of-range id must be refused with veloxquant::Error, never read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fixture_vocab.h"
#include "veloxquant/error.h"
#include "veloxquant/gguf.h"
#include "veloxquant/tokenizer.h"

namespace {

using veloxquant::GgufFile;
using veloxquant::Tokenizer;

Tokenizer from_vocab(const veloxquant::dev::FixtureVocab& vocab) {
  veloxquant::GgufWriter w;
  for (auto& [key, value] : veloxquant::dev::vocab_metadata(vocab)) w.add_metadata(key, value);
  return Tokenizer::from_gguf(GgufFile::parse(w.to_bytes()));
}

std::vector<Tokenizer> load_tokenizers() {
  std::vector<Tokenizer> all;
  all.push_back(from_vocab(veloxquant::dev::sentencepiece_vocab()));
  all.push_back(from_vocab(veloxquant::dev::byte_bpe_vocab()));
  const std::filesystem::path data = VELOXQUANT_TEST_DATA_DIR "/tokenizer";
  for (const char* name : {"bpe-default", "bpe-gpt-2", "bpe-llama-bpe", "bpe-qwen2"}) {
    all.push_back(Tokenizer::from_gguf(GgufFile::open((data / (std::string(name) + ".gguf")).string())));
  }
  const std::string stories = VELOXQUANT_SHARED_DIR "/models/stories260K.gguf";
  if (std::filesystem::exists(stories)) all.push_back(Tokenizer::from_gguf(GgufFile::open(stories)));
  return all;
}

bool in_range(const Tokenizer& tok, int32_t id) {
  return id >= 0 && static_cast<size_t>(id) < tok.vocab_size();
}

void fuzz_encode(const Tokenizer& tok, uint8_t flags, std::string_view text) {
  const auto ids = tok.encode(text, flags & 1, flags & 2);
  for (int32_t id : ids) {
    if (!in_range(tok, id)) __builtin_trap();
  }
  (void)tok.decode(ids, flags & 4);
}

void fuzz_decode(const Tokenizer& tok, uint8_t flags, const uint8_t* data, size_t size) {
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  bool all_in_range = true;
  for (int32_t id : ids) all_in_range = all_in_range && in_range(tok, id);
  try {
    (void)tok.decode(ids, flags & 4);
    for (int32_t id : ids) {
      (void)tok.token_to_piece(id);
      (void)tok.token_text(id);
      (void)tok.is_end_of_generation(id);
    }
  } catch (const veloxquant::Error&) {
    if (all_in_range) __builtin_trap();  // only an out-of-range id may be refused
    return;
  }
  if (!all_in_range) __builtin_trap();  // an out-of-range id was accepted
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Tokenizer> tokenizers = load_tokenizers();
  if (size < 2) return 0;
  const Tokenizer& tok = tokenizers[data[0] % tokenizers.size()];
  const uint8_t flags = data[1];
  if (flags & 8) {
    fuzz_decode(tok, flags, data + 2, size - 2);
  } else {
    fuzz_encode(tok, flags, std::string_view(reinterpret_cast<const char*>(data + 2), size - 2));
  }
  return 0;
}
