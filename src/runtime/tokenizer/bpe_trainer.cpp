#include "runtime/tokenizer/bpe_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>
#include <set>

#include "runtime/tokenizer/unicode.h"
#include "runtime/tokenizer/vocab.h"

namespace veloxquant {

namespace {

// The trainer writes byte-level vocabularies, so a SentencePiece-style pre-tokenizer, whose
// words are UTF-8 with escaped spaces, would count words the tokenizer never sees.
PreTokenizer byte_level_pre_tokenizer(const std::string& name) {
  const PreTokenizerConfig config = pre_tokenizer_config(name);
  if (config.sentencepiece_style) {
    throw Error("BPE trainer: pre-tokenizer '" + name +
                "' is SentencePiece-style; expected a byte-level BPE one");
  }
  return config.kind;
}

}  // namespace

BpeWordCounts::BpeWordCounts(std::string pre_name)
    : pre_name_(std::move(pre_name)), pre_(byte_level_pre_tokenizer(pre_name_)) {}

void BpeWordCounts::add(std::string_view text) {
  for (std::string& word : pre_tokenize(pre_, text)) ++counts_[std::move(word)];
}

namespace {

using Symbol = int32_t;
using PairKey = uint64_t;

PairKey pair_key(Symbol a, Symbol b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
Symbol left_of(PairKey k) { return static_cast<Symbol>(k >> 32); }
Symbol right_of(PairKey k) { return static_cast<Symbol>(k & 0xFFFFFFFFu); }

// A candidate merge as last counted. Entries go stale when counts change; a popped entry whose
// count no longer matches is skipped (a fresh one was pushed when the count changed).
struct Candidate {
  uint64_t count;
  PairKey pair;
  // Most frequent first; among equals the pair of lower symbol ids (older symbols), so that
  // training is deterministic whatever the hash maps' order.
  bool operator<(const Candidate& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

class MergeState {
 public:
  MergeState(const BpeWordCounts& words, size_t first_symbol) {
    words_.reserve(words.counts().size());
    // Sorted, so that word indices (and with them every tie) do not depend on hash order.
    std::vector<std::pair<std::string, uint64_t>> sorted(words.counts().begin(),
                                                         words.counts().end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [text, count] : sorted) {
      Word w{count, {}};
      for (unsigned char c : text) w.symbols.push_back(static_cast<Symbol>(first_symbol + c));
      words_.push_back(std::move(w));
    }
    for (uint32_t i = 0; i < words_.size(); ++i) {
      const Word& w = words_[i];
      for (size_t j = 0; j + 1 < w.symbols.size(); ++j) {
        const PairKey k = pair_key(w.symbols[j], w.symbols[j + 1]);
        counts_[k] += w.count;
        occurrences_[k].push_back(i);
      }
    }
    for (const auto& [k, c] : counts_) heap_.push({c, k});
    stamp_.assign(words_.size(), 0);
  }

  // The most frequent pair with at least min_count occurrences, or false when none is left.
  bool best(uint64_t min_count, PairKey& out) {
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      const auto it = counts_.find(top.pair);
      if (it == counts_.end() || it->second != top.count) {
        heap_.pop();
        continue;
      }
      if (top.count < min_count) return false;
      out = top.pair;
      return true;
    }
    return false;
  }

  // Replaces every occurrence of `pair` (left to right, non-overlapping, as bpe_tokenize applies
  // one merge) by `merged`, keeping the pair counts exact.
  void merge(PairKey pair, Symbol merged) {
    const Symbol a = left_of(pair), b = right_of(pair);
    std::unordered_map<PairKey, int64_t> delta;
    ++round_;
    for (uint32_t wi : occurrences_[pair]) {
      if (stamp_[wi] == round_) continue;  // listed more than once
      stamp_[wi] = round_;
      Word& w = words_[wi];
      std::vector<Symbol>& s = w.symbols;
      bool found = false;
      for (size_t j = 0; j + 1 < s.size() && !found; ++j) found = s[j] == a && s[j + 1] == b;
      if (!found) continue;  // an older occurrence, merged away since
      const auto count = static_cast<int64_t>(w.count);
      for (size_t j = 0; j + 1 < s.size(); ++j) delta[pair_key(s[j], s[j + 1])] -= count;
      std::vector<Symbol> merged_symbols;
      merged_symbols.reserve(s.size());
      for (size_t j = 0; j < s.size(); ++j) {
        if (j + 1 < s.size() && s[j] == a && s[j + 1] == b) {
          merged_symbols.push_back(merged);
          ++j;
        } else {
          merged_symbols.push_back(s[j]);
        }
      }
      s = std::move(merged_symbols);
      for (size_t j = 0; j + 1 < s.size(); ++j) {
        const PairKey k = pair_key(s[j], s[j + 1]);
        delta[k] += count;
        if (s[j] == merged || s[j + 1] == merged) occurrences_[k].push_back(wi);
      }
    }
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      uint64_t& c = counts_[k];
      c = static_cast<uint64_t>(static_cast<int64_t>(c) + d);
      if (c == 0) {
        counts_.erase(k);
      } else {
        heap_.push({c, k});
      }
    }
    counts_.erase(pair);
    occurrences_.erase(pair);
  }

 private:
  struct Word {
    uint64_t count;
    std::vector<Symbol> symbols;
  };
  std::vector<Word> words_;
  std::unordered_map<PairKey, uint64_t> counts_;
  std::unordered_map<PairKey, std::vector<uint32_t>> occurrences_;  // may hold stale entries
  std::priority_queue<Candidate> heap_;
  std::vector<uint32_t> stamp_;
  uint32_t round_ = 0;
};

}  // namespace

TrainedBpe train_bpe(const BpeWordCounts& words, const BpeTrainerOptions& o) {
  const size_t first_byte = o.special_tokens.size();
  if (o.vocab_size <= first_byte + 256) {
    throw Error(fmt::format("BPE vocabulary size {} leaves no room for merges; expected more than "
                            "{} ({} special tokens and 256 bytes)",
                            o.vocab_size, first_byte + 256, first_byte));
  }
  std::set<std::string> seen;
  for (const std::string& t : o.special_tokens) {
    if (t.empty() || !seen.insert(t).second) {
      throw Error(fmt::format("BPE special token '{}' is empty or repeated", t));
    }
  }

  TrainedBpe out;
  out.pre_name = words.pre_name();
  for (const std::string& t : o.special_tokens) {
    out.tokens.push_back(t);
    out.token_types.push_back(static_cast<int32_t>(TokenType::Control));
  }
  for (int byte = 0; byte < 256; ++byte) {
    std::string t;
    unicode::append_utf8(t, unicode::byte_to_codepoint(static_cast<uint8_t>(byte)));
    out.tokens.push_back(std::move(t));
    out.token_types.push_back(static_cast<int32_t>(TokenType::Normal));
  }

  MergeState state(words, first_byte);
  PairKey pair;
  while (out.tokens.size() < o.vocab_size && state.best(o.min_pair_count, pair)) {
    const std::string& left = out.tokens[left_of(pair)];
    const std::string& right = out.tokens[right_of(pair)];
    out.merges.push_back(fmt::format("{} {}", left, right));
    std::string merged = left + right;
    state.merge(pair, static_cast<Symbol>(out.tokens.size()));
    out.tokens.push_back(std::move(merged));
    out.token_types.push_back(static_cast<int32_t>(TokenType::Normal));
  }
  return out;
}

std::vector<std::pair<std::string, GgufValue>> bpe_tokenizer_metadata(const TrainedBpe& bpe) {
  const size_t specials = std::count(bpe.token_types.begin(), bpe.token_types.end(),
                                     static_cast<int32_t>(TokenType::Control));
  std::vector<std::pair<std::string, GgufValue>> m;
  m.emplace_back("tokenizer.ggml.model", GgufValue("gpt2"));
  m.emplace_back("tokenizer.ggml.pre", GgufValue(bpe.pre_name));
  m.emplace_back("tokenizer.ggml.tokens", GgufValue::array_of(bpe.tokens));
  m.emplace_back("tokenizer.ggml.token_type", GgufValue::array_of(bpe.token_types));
  m.emplace_back("tokenizer.ggml.merges", GgufValue::array_of(bpe.merges));
  if (specials > 0) {
    m.emplace_back("tokenizer.ggml.bos_token_id", GgufValue(uint32_t{0}));
    m.emplace_back("tokenizer.ggml.add_bos_token", GgufValue(true));
  }
  if (specials > 1) m.emplace_back("tokenizer.ggml.eos_token_id", GgufValue(uint32_t{1}));
  m.emplace_back("tokenizer.ggml.add_eos_token", GgufValue(false));
  return m;
}

}  // namespace veloxquant
