// Tokenizer: encoding and decoding over the loaded vocabulary (loading is in tokenizer_load.cpp).
#include <algorithm>
#include <cstdio>
#include <string>

#include "runtime/tokenizer/special_tokens.h"
#include "runtime/tokenizer/spm.h"
#include "runtime/tokenizer/tokenizer_impl.h"
#include "runtime/tokenizer/unicode.h"
#include "veloxquant/error.h"

namespace veloxquant {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string_view::npos;) {
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

// A byte-level BPE entry back in bytes. A character outside the byte alphabet cannot come from
// the pre-tokenizer; llama.cpp prints it as "[UNK_BYTE_0x<its UTF-8 in hex><the entry>]", and so
// does this.
std::string bpe_entry_to_bytes(const std::string& entry) {
  std::string out;
  for (const uint32_t cp : unicode::decode_utf8(entry)) {
    const int byte = unicode::codepoint_to_byte(cp);
    if (byte >= 0) {
      out += static_cast<char>(byte);
      continue;
    }
    std::string utf8;
    unicode::append_utf8(utf8, cp);
    out += "[UNK_BYTE_0x";
    for (const char c : utf8) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", static_cast<uint8_t>(c));
      out += hex;
    }
    out += entry + "]";
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> ids;
  if (add_special && m.add_bos && m.bos >= 0) ids.push_back(m.bos);
  // SentencePiece puts the space prefix before the first text and before text that follows a
  // special token, as llama.cpp does.
  bool after_special = true;
  for (const Fragment& f : split_at_special_tokens(text, m.vocab, m.specials, parse_special)) {
    if (f.token >= 0) {
      ids.push_back(f.token);
      after_special = true;
    } else if (m.kind == TokenizerKind::SentencePiece) {
      std::string prefixed = m.add_space_prefix && after_special ? " " : "";
      prefixed.append(f.text);
      spm_tokenize(m.vocab, m.unk, replace_all(prefixed, " ", kSpmSpace), ids);
      after_special = false;
    } else if (m.pre.sentencepiece_style) {
      bpe_tokenize(m.vocab, *m.merges, m.pre, replace_all(f.text, " ", kSpmSpace), ids);
    } else {
      bpe_tokenize(m.vocab, *m.merges, m.pre, f.text, ids);
    }
  }
  if (add_special && m.add_eos && m.eos >= 0) ids.push_back(m.eos);
  return ids;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  const std::string& text = token_text(id);
  switch (impl_->vocab.type(id)) {
    case TokenType::Normal:
      return impl_->kind == TokenizerKind::SentencePiece || impl_->pre.sentencepiece_style
                 ? replace_all(text, kSpmSpace, " ")
                 : bpe_entry_to_bytes(text);
    case TokenType::UserDefined:
      return text;
    case TokenType::Byte:  // "<0xXX>", checked when loading
      return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
    case TokenType::Control:
    case TokenType::Unknown:
      return special ? text : std::string();
    case TokenType::Unused:
    case TokenType::Undefined:
      break;
  }
  return {};
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool strip_leading_space) const {
  std::string out;
  bool strip = strip_leading_space && impl_->add_space_prefix;
  for (const int32_t id : ids) {
    std::string piece = token_to_piece(id);
    if (strip && !piece.empty()) {
      if (piece.front() == ' ') piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  return out;
}

TokenizerKind Tokenizer::kind() const { return impl_->kind; }
size_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }
int32_t Tokenizer::bos() const { return impl_->bos; }
int32_t Tokenizer::eos() const { return impl_->eos; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::binary_search(impl_->end_of_generation.begin(), impl_->end_of_generation.end(), id);
}

const std::string& Tokenizer::token_text(int32_t id) const {
  if (!impl_->vocab.contains(id)) {
    throw Error("token id " + std::to_string(id) + " is out of range; expected 0.." +
                std::to_string(impl_->vocab.size() - 1));
  }
  return impl_->vocab.text(id);
}

size_t complete_utf8(std::string_view text) {
  size_t i = text.size(), back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(text[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return text.size();
  const unsigned char lead = static_cast<unsigned char>(text[i - 1]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return back + 1 >= need ? text.size() : i - 1;
}

}  // namespace veloxquant
