#include "veloxquant/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include "runtime/perplexity/logprob_file.h"

namespace veloxquant {
namespace {

// log-softmax of one row, in place, accumulated in double.
void log_softmax(float* row, size_t n) {
  const float mx = *std::max_element(row, row + n);
  double z = 0;
  for (size_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(row[i] - mx));
  const double lz = static_cast<double>(mx) + std::log(z);
  for (size_t i = 0; i < n; ++i) row[i] = static_cast<float>(row[i] - lz);
}

// Running mean and standard error of the mean.
struct Moments {
  double sum = 0, sum_sq = 0;
  size_t n = 0;
  void add(double x) {
    sum += x;
    sum_sq += x * x;
    ++n;
  }
  double mean() const { return n ? sum / static_cast<double>(n) : 0; }
  double standard_error() const {
    if (n < 2) return 0;
    const double m = mean(), var = sum_sq / static_cast<double>(n) - m * m;
    return std::sqrt(std::max(0.0, var) / static_cast<double>(n - 1));
  }
};

}  // namespace

PerplexityResult compute_perplexity(const Model& model, std::string_view text,
                                    const PerplexityOptions& o) {
  const size_t ctx = o.context, vocab = model.config().vocab;
  if (ctx < 4) throw Error("perplexity context " + std::to_string(ctx) + " is too small; expected >= 4");
  const Tokenizer& tok = model.tokenizer();
  const std::vector<int32_t> tokens = tok.encode(text, /*add_bos=*/true);
  if (tokens.size() < 2 * ctx) {
    throw Error("the text has " + std::to_string(tokens.size()) + " tokens; perplexity with a context of " +
                std::to_string(ctx) + " needs at least " + std::to_string(2 * ctx));
  }
  size_t chunks = tokens.size() / ctx;
  if (o.chunks) chunks = std::min(chunks, o.chunks);
  const size_t first = ctx / 2, scored = ctx - 1 - first;
  // llama.cpp puts BOS at the start of every chunk when the vocabulary adds one.
  const bool bos = !tokens.empty() && tok.bos() >= 0 && tokens[0] == tok.bos();

  runtime::LogprobHeader header{static_cast<uint32_t>(vocab), static_cast<uint32_t>(ctx),
                                static_cast<uint32_t>(chunks), static_cast<uint32_t>(scored), 0};
  header.token_hash = runtime::fnv1a(std::span(tokens.data(), chunks * ctx));
  std::optional<runtime::LogprobWriter> writer;
  std::optional<runtime::LogprobReader> reader;
  if (!o.save_base.empty()) writer.emplace(o.save_base, header);
  if (!o.kl_base.empty()) reader.emplace(o.kl_base, header);

  PerplexityResult r;
  r.chunks = chunks;
  r.context = ctx;
  r.text_tokens = tokens.size();
  Session session(model, SessionOptions{o.kv_spec, ctx, o.device, o.gpu_weights});
  Moments nll, kl;
  size_t agree = 0;
  std::vector<float> base(scored * vocab);
  const auto start = std::chrono::steady_clock::now();
  for (size_t c = 0; c < chunks; ++c) {
    std::vector<int32_t> batch(tokens.begin() + static_cast<std::ptrdiff_t>(c * ctx),
                               tokens.begin() + static_cast<std::ptrdiff_t>((c + 1) * ctx));
    if (bos) batch[0] = tok.bos();
    session.reset();
    std::vector<float> logits = session.eval(batch, Logits::All);
    if (c == 0) {
      r.kv_bytes = session.kv_bytes();
      r.kv_fp16_bytes = session.kv_fp16_bytes();
      r.key_bytes = session.key_bytes();
      r.value_bytes = session.value_bytes();
    }
    r.kv_peak_held_bytes = std::max(r.kv_peak_held_bytes, session.kv_peak_held_bytes());
    float* rows = &logits[first * vocab];
    for (size_t j = 0; j < scored; ++j) {
      float* row = rows + j * vocab;
      log_softmax(row, vocab);
      nll.add(-static_cast<double>(row[tokens[c * ctx + first + j + 1]]));
    }
    const std::span<const float> chunk_logprobs(rows, scored * vocab);
    if (writer) writer->write(chunk_logprobs);
    if (reader) {
      reader->read(base);
      for (size_t j = 0; j < scored; ++j) {
        const float* p = &base[j * vocab];
        const float* q = rows + j * vocab;
        double d = 0;
        for (size_t i = 0; i < vocab; ++i) d += std::exp(static_cast<double>(p[i])) * (p[i] - q[i]);
        kl.add(std::max(0.0, d));
        agree += std::max_element(p, p + vocab) - p == std::max_element(q, q + vocab) - q;
      }
    }
    if (o.progress) o.progress(c + 1, chunks, std::exp(nll.mean()));
  }
  if (writer) writer->finish();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.tokens_per_second = static_cast<double>(chunks * ctx) / std::max(r.seconds, 1e-9);
  r.scored_tokens = nll.n;
  r.mean_nll = nll.mean();
  r.perplexity = std::exp(r.mean_nll);
  r.perplexity_error = r.perplexity * nll.standard_error();
  if (reader) {
    r.compared = true;
    r.kl_mean = kl.mean();
    r.kl_error = kl.standard_error();
    r.top1_agreement = static_cast<double>(agree) / static_cast<double>(kl.n);
  }
  return r;
}

}  // namespace veloxquant
