#include "runtime/tokenizer/special_tokens.h"

#include <algorithm>
#include <array>
#include <set>

namespace veloxquant {

std::vector<int32_t> special_tokens_by_length(const Vocab& vocab) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
    const TokenType t = vocab.type(id);
    if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) {
      ids.push_back(id);
    }
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return vocab.text(a).size() > vocab.text(b).size();
  });
  return ids;
}

std::vector<Fragment> split_at_special_tokens(std::string_view text, const Vocab& vocab,
                                              const std::vector<int32_t>& specials,
                                              bool parse_special) {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({text, -1});
  std::vector<Fragment> next;
  for (const int32_t id : specials) {
    if (!parse_special && vocab.type(id) != TokenType::UserDefined) continue;
    const std::string& needle = vocab.text(id);
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      for (size_t hit; (hit = f.text.find(needle, pos)) != std::string_view::npos;) {
        if (hit > pos) next.push_back({f.text.substr(pos, hit - pos), -1});
        next.push_back({{}, id});
        pos = hit + needle.size();
      }
      if (pos < f.text.size()) next.push_back({f.text.substr(pos), -1});
    }
    fragments.swap(next);
  }
  return fragments;
}

namespace {

bool is_end_of_generation_text(std::string_view text) {
  // llama.cpp's list of end-of-generation texts, plus the texts it recognises as FIM padding,
  // repository and file-separator tokens, which it also stops at.
  static constexpr std::array<std::string_view, 33> kTexts = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
      "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
      "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
      "<|tool_response>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
      "[e~[", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>",
      "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
  };
  return std::find(kTexts.begin(), kTexts.end(), text) != kTexts.end();
}

}  // namespace

std::vector<int32_t> find_end_of_generation_tokens(Vocab& vocab,
                                                   const std::vector<int32_t>& declared) {
  std::set<int32_t> eog;
  for (const int32_t id : declared) {
    if (id >= 0) eog.insert(id);
  }
  for (int32_t id = 0; id < static_cast<int32_t>(vocab.size()); ++id) {
    if (!is_end_of_generation_text(vocab.text(id))) continue;
    eog.insert(id);
    vocab.set_type(id, TokenType::Control);
  }
  const auto member = [&](std::string_view text) {
    const int32_t id = vocab.find(text);
    return id >= 0 && eog.count(id) > 0 ? id : -1;
  };
  // Models whose chat format continues after these tokens.
  if (const int32_t end = member("<|end|>");
      end >= 0 && ((member("<|return|>") >= 0 && member("<|call|>") >= 0) ||
                   (member("<|calls|>") >= 0 && member("<|flush|>") >= 0))) {
    eog.erase(end);
    vocab.set_type(end, TokenType::UserDefined);
  }
  if (const int32_t s = member("</s>");
      s >= 0 && (member("<|tool_response>") >= 0 || member("<|plamo:eos|>") >= 0)) {
    eog.erase(s);
    vocab.set_type(s, TokenType::Normal);
  }
  return {eog.begin(), eog.end()};
}

}  // namespace veloxquant
