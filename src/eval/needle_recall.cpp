#include "eval/needle_recall.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

// The fewest text tokens a sequence must hold besides BOS and the two needle copies.
constexpr size_t kMinText = 8;

// The ids a needle may use: those that print as text. Control, unknown and unused tokens print
// nothing; BOS and end-of-generation ids are excluded by name too, because token types are
// optional in GGUF and without them every token counts as normal text.
std::vector<int32_t> printable_ids(const Model& model) {
  const Tokenizer& tok = model.tokenizer();
  const size_t n = std::min<size_t>(tok.vocab_size(), model.config().vocab);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (id != tok.bos() && !tok.is_end_of_generation(id) && !tok.token_to_piece(id).empty())
      ids.push_back(id);
  }
  if (ids.size() < 2) {
    throw Error("the vocabulary has " + std::to_string(ids.size()) +
                " printable tokens; a needle needs at least 2 to draw from");
  }
  return ids;
}

// Throws unless every option and the haystack fit the model. `fixed`: the tokens of a sequence
// that are not haystack text when the needle is planted.
void check_options(const NeedleOptions& o, size_t fixed, size_t context, size_t haystack) {
  if (o.lengths.empty()) throw Error("needle recall got no lengths; expected at least one");
  if (o.depths.empty()) throw Error("needle recall got no depths; expected at least one");
  if (o.needle_tokens < 2) {
    throw Error("needle of " + std::to_string(o.needle_tokens) +
                " tokens; expected at least 2 (the first token of the final copy is not scored)");
  }
  if (o.trials == 0) throw Error("needle recall trials 0; expected at least 1");
  for (const double d : o.depths) {
    if (!(d >= 0 && d <= 1)) throw Error(fmt::format("needle depth {}; expected a value in [0, 1]", d));
  }
  for (const size_t length : o.lengths) {
    if (length < fixed + kMinText) {
      throw Error(fmt::format("sequence length {} cannot hold BOS, two needles of {} tokens and {} text "
                              "tokens; expected at least {}",
                              length, o.needle_tokens, kMinText, fixed + kMinText));
    }
    if (length > context) {
      throw Error(fmt::format("sequence length {} exceeds the model's context of {} tokens", length, context));
    }
    // The control puts text where the first copy would be, so it reads needle_tokens more.
    const size_t text = length - fixed + (o.plant ? 0 : o.needle_tokens);
    if (haystack < text) {
      throw Error(fmt::format("the haystack has {} tokens; a sequence of length {} needs at least {}",
                              haystack, length, text));
    }
  }
}

}  // namespace

std::vector<int32_t> needle_sequence(int32_t bos, std::span<const int32_t> text,
                                     std::span<const int32_t> needle, double depth, bool plant) {
  std::vector<int32_t> seq;
  if (bos >= 0) seq.push_back(bos);
  const auto at = static_cast<std::ptrdiff_t>(plant ? std::lround(depth * static_cast<double>(text.size())) : 0);
  seq.insert(seq.end(), text.begin(), text.begin() + at);
  if (plant) seq.insert(seq.end(), needle.begin(), needle.end());
  seq.insert(seq.end(), text.begin() + at, text.end());
  seq.insert(seq.end(), needle.begin(), needle.end());
  return seq;
}

NeedleResult needle_recall(const Model& model, std::span<const int32_t> haystack,
                           const NeedleOptions& o) {
  const int32_t bos = model.tokenizer().bos();
  const size_t n = o.needle_tokens;
  const size_t fixed = (bos >= 0 ? 1 : 0) + 2 * n;
  check_options(o, fixed, model.config().context_length, haystack.size());
  const std::vector<int32_t> ids = printable_ids(model);

  NeedleResult r;
  const size_t total = o.lengths.size() * o.depths.size() * o.trials;
  size_t done = 0, all_hits = 0, all_scored = 0;
  for (const size_t length : o.lengths) {
    Session session(model, SessionOptions{o.kv_spec, length, o.device, o.gpu_weights});
    const size_t text_tokens = length - fixed + (o.plant ? 0 : n);
    for (const double depth : o.depths) {
      NeedleCell cell{length, depth, 0, 0, 0, 0};
      size_t hits = 0;
      for (size_t t = 0; t < o.trials; ++t) {
        // Trials read evenly spaced stretches of the haystack. The needle depends on the length
        // and trial only, so the depths of one trial differ in nothing but where it sits.
        const size_t offset = (haystack.size() - text_tokens) * t / o.trials;
        Rng rng(derive_seed(o.seed, {length, t}));
        std::vector<int32_t> needle(n);
        for (int32_t& id : needle)
          id = ids[static_cast<size_t>(rng.uniform() * static_cast<double>(ids.size()))];
        const std::vector<int32_t> seq =
            needle_sequence(bos, haystack.subspan(offset, text_tokens), needle, depth, o.plant);

        // The prompt runs through the final copy's first token, as a question would end it; the
        // copy's other tokens are then read one at a time, as generation reads them, each
        // predicted from what the cache kept of the prompt (a policy that compresses the prompt
        // selects after it, one that evicts as it goes keeps evicting).
        session.reset();
        const size_t prompt = length - n + 1;
        std::vector<float> logits = session.eval(std::span(seq).first(prompt), Logits::Last);
        for (size_t j = 0; j + 1 < n; ++j) {
          hits += std::max_element(logits.begin(), logits.end()) - logits.begin() == needle[j + 1];
          // The copy's last token too: the cell's bytes are those of all `length` tokens.
          logits = session.eval(std::span(seq).subspan(prompt + j, 1), Logits::Last);
        }
        cell.scored += n - 1;
        cell.kv_bytes = session.kv_bytes();
        cell.kv_fp16_bytes = session.kv_fp16_bytes();
        if (o.progress) o.progress(++done, total);
      }
      cell.recall = static_cast<double>(hits) / static_cast<double>(cell.scored);
      all_hits += hits;
      all_scored += cell.scored;
      r.cells.push_back(cell);
    }
  }
  // Every cell scores the same number of tokens, so this is also the mean of the cells' recalls.
  r.mean_recall = static_cast<double>(all_hits) / static_cast<double>(all_scored);
  return r;
}

}  // namespace veloxquant
