#include "eval/long_tasks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr size_t kMinFiller = 16;  // text tokens a sample must hold besides its fixed text
constexpr size_t kNeedles = 4;     // needles of the two NIAH tasks
constexpr size_t kHops = 4;        // variable_tracking: names after the first
constexpr size_t kCommon = 10;     // common_words: words asked for
constexpr size_t kRare = 3;        // common_words: occurrences of every other word

size_t pick(Rng& rng, size_t n) {
  return std::min(n - 1, static_cast<size_t>(rng.uniform() * static_cast<double>(n)));
}

std::string seven_digits(Rng& rng) { return std::to_string(1000000 + pick(rng, 9000000)); }

std::string variable_name(Rng& rng) {
  std::string name(5, 'A');
  for (char& c : name) c = static_cast<char>('A' + pick(rng, 26));
  return name;
}

// n distinct words, in the order drawn.
std::vector<std::string> draw_words(Rng& rng, const std::vector<std::string>& words, size_t n) {
  std::set<size_t> taken;
  std::vector<std::string> out;
  while (out.size() < n) {
    const size_t i = pick(rng, words.size());
    if (taken.insert(i).second) out.push_back(words[i]);
  }
  return out;
}

std::vector<int32_t> tokens_of(const Model& model, std::string_view text) {
  return model.tokenizer().encode(text, /*add_special=*/false);
}

std::string too_short(const std::string& task, size_t length, size_t fixed) {
  return fmt::format(
      "{} at {} tokens: its fixed text and answer take {} tokens; expected a length of at least {}", task,
      length, fixed, fixed + kMinFiller);
}

// A stretch of `n` filler tokens from an offset the rng picks.
std::span<const int32_t> filler_stretch(std::span<const int32_t> filler, size_t n, Rng& rng,
                                        const std::string& task, size_t length) {
  if (filler.size() < n) {
    throw Error(fmt::format("{} at {} tokens needs {} tokens of text; the text has {}", task, length, n,
                            filler.size()));
  }
  return filler.subspan(pick(rng, filler.size() - n + 1), n);
}

// BOS, `header`, `length - max_new` tokens in all of text with `inserts` hidden in order at random
// depths (each moved to just after a sentence's end when one is within 32 tokens), then `query`.
LongTaskSample hide_in_text(const Model& model, const std::string& task, size_t length, size_t max_new,
                            std::span<const int32_t> filler, Rng& rng, const std::string& header,
                            const std::vector<std::string>& inserts, const std::string& query) {
  const Tokenizer& tok = model.tokenizer();
  std::vector<int32_t> prompt;
  if (tok.bos() >= 0) prompt.push_back(tok.bos());
  const std::vector<int32_t> head = tokens_of(model, header), tail = tokens_of(model, query);
  std::vector<std::vector<int32_t>> pieces;
  size_t fixed = prompt.size() + head.size() + tail.size() + max_new;
  for (const std::string& s : inserts) {
    pieces.push_back(tokens_of(model, s));
    fixed += pieces.back().size();
  }
  if (length < fixed + kMinFiller) throw Error(too_short(task, length, fixed));
  const std::span<const int32_t> text = filler_stretch(filler, length - fixed, rng, task, length);

  std::vector<size_t> at(pieces.size());
  for (size_t& a : at) a = pick(rng, text.size() + 1);
  std::sort(at.begin(), at.end());
  for (size_t& a : at) {
    for (size_t j = a; j < std::min(text.size(), a + 32); ++j) {
      if (tok.token_to_piece(text[j]).find('.') != std::string::npos) {
        a = j + 1;
        break;
      }
    }
  }
  std::sort(at.begin(), at.end());
  prompt.insert(prompt.end(), head.begin(), head.end());
  size_t from = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    prompt.insert(prompt.end(), text.begin() + static_cast<std::ptrdiff_t>(from),
                  text.begin() + static_cast<std::ptrdiff_t>(at[i]));
    prompt.insert(prompt.end(), pieces[i].begin(), pieces[i].end());
    from = at[i];
  }
  prompt.insert(prompt.end(), text.begin() + static_cast<std::ptrdiff_t>(from), text.end());
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  return {std::move(prompt), {}, max_new};
}

std::string needle(const std::string& key, const std::string& value) {
  return " One of the special magic numbers for " + key + " is: " + value + ".";
}

const std::string kNiahHeader =
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz "
    "you about the numbers afterwards.\n";

LongTaskSample niah_multikey(const Model& model, size_t length, std::span<const int32_t> filler, Rng& rng,
                             const std::vector<std::string>& words) {
  const std::vector<std::string> keys = draw_words(rng, words, kNeedles);
  std::vector<std::string> values, inserts;
  for (const std::string& key : keys) {
    values.push_back(seven_digits(rng));
    inserts.push_back(needle(key, values.back()));
  }
  const size_t asked = pick(rng, kNeedles);
  const std::string query = "\nWhat is the special magic number for " + keys[asked] +
                            " mentioned in the provided text? The special magic number for " + keys[asked] +
                            " mentioned in the provided text is:";
  LongTaskSample s = hide_in_text(model, "niah_multikey", length, 16, filler, rng, kNiahHeader, inserts,
                                  query);
  s.answers = {values[asked]};
  return s;
}

LongTaskSample niah_multivalue(const Model& model, size_t length, std::span<const int32_t> filler, Rng& rng,
                               const std::vector<std::string>& words) {
  const std::string key = draw_words(rng, words, 1)[0];
  std::vector<std::string> values, inserts;
  for (size_t i = 0; i < kNeedles; ++i) {
    values.push_back(seven_digits(rng));
    inserts.push_back(needle(key, values.back()));
  }
  const std::string query = "\nWhat are all the special magic numbers for " + key +
                            " mentioned in the provided text? The special magic numbers for " + key +
                            " mentioned in the provided text are:";
  LongTaskSample s = hide_in_text(model, "niah_multivalue", length, 48, filler, rng, kNiahHeader, inserts,
                                  query);
  s.answers = values;
  return s;
}

LongTaskSample variable_tracking(const Model& model, size_t length, std::span<const int32_t> filler,
                                 Rng& rng) {
  std::vector<std::string> names;
  while (names.size() < kHops + 1) {
    std::string name = variable_name(rng);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
  }
  const std::string value = std::to_string(10000 + pick(rng, 90000));
  std::vector<std::string> inserts{" VAR " + names[0] + " = " + value + "."};
  for (size_t i = 1; i < names.size(); ++i)
    inserts.push_back(" VAR " + names[i] + " = VAR " + names[i - 1] + ".");
  const std::string query = fmt::format(
      "\nQuestion: Find all variables that are assigned the value {} in the text above. Answer: According to "
      "the chain(s) of variable assignment in the text above, {} variables are assigned the value {}, they "
      "are:",
      value, names.size(), value);
  LongTaskSample s =
      hide_in_text(model, "variable_tracking", length, 32, filler, rng,
                   "Memorize and track the chain(s) of variable assignment hidden in the following "
                   "text.\n",
                   inserts, query);
  s.answers = names;
  return s;
}

// The numbered list, text before it filling what it leaves of the length: BOS, text, header,
// list, query.
LongTaskSample common_words(const Model& model, size_t length, std::span<const int32_t> filler, Rng& rng,
                            const std::vector<std::string>& words) {
  const std::string task = "common_words";
  const std::string header = "Below is a numbered list of words. In these words, some appear more often than "
                             "others. Memorize the ones "
                             "that appear most often.\n";
  const std::string query =
      "\nQuestion: What are the 10 most common words in the above list? Answer: The top 10 words that appear "
      "most often in the list are:";
  const Tokenizer& tok = model.tokenizer();
  const size_t max_new = 64;
  const std::vector<int32_t> tail = tokens_of(model, query);
  const size_t fixed = (tok.bos() >= 0 ? 1 : 0) + tail.size() + max_new;
  if (const size_t least = fixed + tokens_of(model, header).size(); length < least + kMinFiller) {
    throw Error(too_short(task, length, least));
  }
  const size_t budget = length - fixed;  // the header, the list and the text before them
  // RULER's 30 occurrences of each common word at 4k tokens, fewer when the list cannot hold them
  // (about 6 tokens an entry) in 60 % of the budget.
  size_t often = 30;
  while (often > kRare + 1 && kCommon * often * 6 > budget * 6 / 10) --often;
  // Start from more rare words than fit (5 tokens an entry) and drop some until the list fits.
  const size_t common_tokens = kCommon * often * 6;
  const size_t want = budget > common_tokens ? (budget - common_tokens) / (kRare * 5) : 0;
  const std::vector<std::string> drawn = draw_words(rng, words, std::min(words.size(), kCommon + want));
  const uint64_t order_seed = rng.next_u64();

  // Fewer rare words until the list fits; each try renders and tokenizes the whole list.
  size_t rare = drawn.size() - kCommon;
  std::vector<int32_t> list;
  while (true) {
    std::vector<const std::string*> entries;
    for (size_t i = 0; i < kCommon; ++i) entries.insert(entries.end(), often, &drawn[i]);
    for (size_t i = 0; i < rare; ++i) entries.insert(entries.end(), kRare, &drawn[kCommon + i]);
    Rng order(order_seed);
    for (size_t i = entries.size(); i > 1; --i) std::swap(entries[i - 1], entries[pick(order, i)]);
    std::string text;
    for (size_t i = 0; i < entries.size(); ++i) text += fmt::format("{}. {}\n", i + 1, *entries[i]);
    list = tokens_of(model, header + text);
    if (list.size() + kMinFiller <= budget) break;
    if (rare == 0) throw Error(too_short(task, length, fixed + list.size()));
    const size_t over = list.size() + kMinFiller - budget;
    rare -= std::min(rare, over / (kRare * 6) + 1);
  }
  const std::span<const int32_t> text = filler_stretch(filler, budget - list.size(), rng, task, length);
  LongTaskSample s;
  if (tok.bos() >= 0) s.prompt.push_back(tok.bos());
  s.prompt.insert(s.prompt.end(), text.begin(), text.end());
  s.prompt.insert(s.prompt.end(), list.begin(), list.end());
  s.prompt.insert(s.prompt.end(), tail.begin(), tail.end());
  s.answers.assign(drawn.begin(), drawn.begin() + kCommon);
  s.max_new_tokens = max_new;
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const std::vector<std::string>& long_task_names() {
  static const std::vector<std::string> names{"niah_multikey", "niah_multivalue", "variable_tracking",
                                              "common_words"};
  return names;
}

std::vector<std::string> task_words(std::string_view text) {
  std::set<std::string> words;
  std::string word;
  bool clean = true;  // the word so far is all lowercase letters
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ' ';
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (clean && word.size() >= 4 && word.size() <= 10) words.insert(word);
      word.clear();
      clean = true;
    } else {
      clean = clean && c >= 'a' && c <= 'z';
      word += c;
    }
  }
  if (words.size() < 64) {
    throw Error(
        fmt::format("the text has {} distinct lowercase words of 4 to 10 letters; the long-context tasks "
                    "need at least 64",
                    words.size()));
  }
  return {words.begin(), words.end()};
}

void check_long_tasks(const std::vector<std::string>& tasks, const std::vector<size_t>& lengths,
                      size_t samples, size_t context) {
  const auto& names = long_task_names();
  for (const std::string& task : tasks) {
    if (std::find(names.begin(), names.end(), task) == names.end()) {
      throw Error(
          fmt::format("unknown long-context task '{}'; expected one of {}", task, fmt::join(names, ", ")));
    }
  }
  for (const size_t length : lengths) {
    if (length > context) {
      throw Error(fmt::format("long-context task length {} exceeds the model's context of {} tokens", length,
                              context));
    }
  }
  if (samples == 0) throw Error("long-context tasks: 0 samples; expected at least 1");
}

LongTaskSample build_long_task(const Model& model, const std::string& task, size_t length, size_t index,
                               uint64_t seed, std::span<const int32_t> filler,
                               const std::vector<std::string>& words) {
  check_long_tasks({task}, {}, 1, 0);
  const auto& names = long_task_names();
  const auto it = std::find(names.begin(), names.end(), task);
  Rng rng(derive_seed(seed, {static_cast<uint64_t>(it - names.begin()), length, index}));
  LongTaskSample s;
  if (task == "niah_multikey") s = niah_multikey(model, length, filler, rng, words);
  if (task == "niah_multivalue") s = niah_multivalue(model, length, filler, rng, words);
  if (task == "variable_tracking") s = variable_tracking(model, length, filler, rng);
  if (task == "common_words") s = common_words(model, length, filler, rng, words);
  return s;
}

double score_long_task(std::string_view generated, const std::vector<std::string>& answers) {
  if (answers.empty()) return 0;
  const std::string text = lower(generated);
  size_t found = 0;
  for (const std::string& a : answers) found += text.find(lower(a)) != std::string::npos;
  return static_cast<double>(found) / static_cast<double>(answers.size());
}

LongTaskResult run_long_tasks(const Model& model, std::string_view text, std::span<const int32_t> filler,
                              const LongTaskOptions& o) {
  if (o.tasks.empty()) throw Error("long-context tasks: none named; expected at least one");
  if (o.lengths.empty()) throw Error("long-context tasks: no lengths; expected at least one");
  check_long_tasks(o.tasks, o.lengths, o.samples, model.config().context_length);
  const std::vector<std::string> words = task_words(text);
  const Tokenizer& tok = model.tokenizer();
  LongTaskResult r;
  const size_t total = o.tasks.size() * o.lengths.size() * o.samples;
  size_t done = 0;
  for (const std::string& task : o.tasks) {
    for (const size_t length : o.lengths) {
      Session session(model, SessionOptions{o.kv_spec, length, o.device, o.gpu_weights});
      LongTaskCell cell{task, length, o.samples, 0};
      for (size_t i = 0; i < o.samples; ++i) {
        const LongTaskSample s = build_long_task(model, task, length, i, o.seed, filler, words);
        session.reset();
        std::vector<float> logits = session.eval(s.prompt, Logits::Last);
        std::vector<int32_t> answer;
        while (answer.size() < s.max_new_tokens) {
          const auto id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) -
                                               logits.begin());
          if (tok.is_end_of_generation(id)) break;
          answer.push_back(id);
          if (answer.size() < s.max_new_tokens)
            logits = session.eval(std::span(&answer.back(), 1), Logits::Last);
        }
        cell.score += score_long_task(tok.decode(answer), s.answers);
        if (o.progress) o.progress(++done, total);
      }
      cell.score /= static_cast<double>(o.samples);
      r.mean_score += cell.score;
      r.cells.push_back(cell);
    }
  }
  r.mean_score /= static_cast<double>(r.cells.size());
  return r;
}

}  // namespace veloxquant
