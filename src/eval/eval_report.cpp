#include "eval/eval_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "veloxquant/error.h"

namespace veloxquant {

double MethodEval::compression_ratio() const {
  return bytes() ? static_cast<double>(fp16_bytes) / static_cast<double>(bytes()) : 0.0;
}

double MethodEval::bits_per_element() const {
  // fp16 stores 2 bytes per element, so fp16_bytes / 2 elements.
  return fp16_bytes ? 16.0 * static_cast<double>(bytes()) / static_cast<double>(fp16_bytes) : 0.0;
}

std::string guardrail_failures(const MethodEval& row, const MethodEval& baseline, const Guardrail& g) {
  std::string why;
  auto add = [&](const std::string& clause) { why += (why.empty() ? "" : "; ") + clause; };
  if (row.perplexity_delta_pct > g.max_delta_pct)
    add(fmt::format("perplexity {:+.2f} % > {:.2f} %", row.perplexity_delta_pct, g.max_delta_pct));
  if (row.kl_mean > g.max_kl) add(fmt::format("KL {:.4f} > {:.4f} nats", row.kl_mean, g.max_kl));
  if (row.retrieval_mean < baseline.retrieval_mean - g.recall_tolerance) {
    add(fmt::format("retrieval {:.1f} % < fp16's {:.1f} % - {:.1f}", 100.0 * row.retrieval_mean,
                    100.0 * baseline.retrieval_mean, 100.0 * g.recall_tolerance));
  }
  return why;
}

std::optional<size_t> recommend(const std::vector<MethodEval>& rows, const Guardrail& g) {
  if (rows.empty()) throw Error("recommend: no rows; expected the fp16 baseline first");
  std::optional<size_t> best;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (!guardrail_failures(rows[i], rows[0], g).empty()) continue;
    if (!best || rows[i].bytes() < rows[*best].bytes() ||
        (rows[i].bytes() == rows[*best].bytes() && rows[i].perplexity < rows[*best].perplexity)) {
      best = i;
    }
  }
  return best;
}

std::vector<bool> pareto_front(const std::vector<MethodEval>& rows) {
  std::vector<bool> front(rows.size(), true);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows.size() && front[i]; ++j) {
      const bool no_worse = rows[j].bytes() <= rows[i].bytes() && rows[j].perplexity <= rows[i].perplexity;
      const bool better = rows[j].bytes() < rows[i].bytes() || rows[j].perplexity < rows[i].perplexity;
      if (j != i && no_worse && better) front[i] = false;
    }
  }
  return front;
}

std::string results_json(const EvalSetup& s, const std::vector<MethodEval>& rows,
                         const std::optional<Guardrail>& guardrail) {
  nlohmann::ordered_json j;
  j["setup"] = {{"model", s.model},
                {"text", s.text},
                {"context", s.context},
                {"chunks", s.chunks},
                {"scored_tokens", s.scored_tokens},
                {"retrieval_lengths", s.retrieval_lengths},
                {"retrieval_depths", s.retrieval_depths},
                {"needle_tokens", s.needle_tokens},
                {"trials", s.trials},
                {"tasks", s.tasks},
                {"task_lengths", s.task_lengths},
                {"task_samples", s.task_samples},
                {"seed", s.seed},
                {"decode_prompt", s.decode_prompt},
                {"decode_tokens", s.decode_tokens},
                {"observed_tokens", s.observed_tokens},
                {"threads", s.threads},
                {"device", s.device}};
  if (!s.skipped.empty()) {
    nlohmann::ordered_json skipped = nlohmann::ordered_json::array();
    for (const DeviceSkip& k : s.skipped) skipped.push_back({{"spec", k.spec}, {"reason", k.reason}});
    j["setup"]["not_on_device"] = skipped;
  }
  const std::vector<bool> front = pareto_front(rows);
  j["methods"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const MethodEval& r = rows[i];
    nlohmann::ordered_json cells = nlohmann::ordered_json::array();
    for (const NeedleCell& c : r.retrieval)
      cells.push_back({{"length", c.length}, {"depth", c.depth}, {"recall", c.recall}, {"scored", c.scored}});
    nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
    for (const LongTaskCell& c : r.tasks)
      tasks.push_back({{"task", c.task}, {"length", c.length}, {"samples", c.samples}, {"score", c.score}});
    j["methods"].push_back({{"spec", r.spec},
                            {"key_bytes", r.key_bytes},
                            {"value_bytes", r.value_bytes},
                            {"kv_bytes", r.bytes()},
                            {"fp16_bytes", r.fp16_bytes},
                            {"compression_ratio", r.compression_ratio()},
                            {"bits_per_element", r.bits_per_element()},
                            {"perplexity", r.perplexity},
                            {"perplexity_error", r.perplexity_error},
                            {"perplexity_delta_pct", r.perplexity_delta_pct},
                            {"kl_mean", r.kl_mean},
                            {"kl_error", r.kl_error},
                            {"top1_agreement", r.top1_agreement},
                            {"retrieval_mean", r.retrieval_mean},
                            {"retrieval", cells},
                            {"tasks_mean", r.tasks_mean},
                            {"tasks", tasks},
                            {"prefill_tokens_per_s", r.prefill_tokens_per_s},
                            {"decode_tokens_per_s", r.decode_tokens_per_s},
                            {"kv_peak_held_bytes", r.kv_peak_held_bytes},
                            {"peak_rss_mib", r.peak_rss_mib},
                            {"seconds", r.seconds},
                            {"pareto", static_cast<bool>(front[i])}});
    if (!r.observations.empty())
      j["methods"].back()["observations"] = nlohmann::ordered_json::parse(observations_json(r.observations));
  }
  if (guardrail) {
    const std::optional<size_t> best = recommend(rows, *guardrail);
    j["guardrail"] = {{"max_delta_pct", guardrail->max_delta_pct},
                      {"max_kl", guardrail->max_kl},
                      {"recall_tolerance", guardrail->recall_tolerance}};
    j["recommendation"] = best ? nlohmann::ordered_json(rows[*best].spec) : nlohmann::ordered_json(nullptr);
  }
  return j.dump(2) + "\n";
}

std::string results_markdown(const EvalSetup& s, const std::vector<MethodEval>& rows) {
  const std::vector<bool> front = pareto_front(rows);
  std::string md = fmt::format(
      "Model `{}`, text `{}`: perplexity over {} chunks of {} tokens ({} scored), retrieval of a "
      "{}-token needle ({} trial{} per cell), decode speed over {} tokens after a {}-token prompt, "
      "{} thread{}. KV bytes are one chunk's caches, all layers; KV held is the most their buffers took "
      "from the allocator during a chunk. Pareto front (bytes against perplexity) in bold.\n\n",
      s.model, s.text, s.chunks, s.context, s.scored_tokens, s.needle_tokens, s.trials,
      s.trials == 1 ? "" : "s", s.decode_tokens, s.decode_prompt, s.threads, s.threads == 1 ? "" : "s");
  if (s.device != "cpu") {
    md += fmt::format("Every measurement ran on {}", s.device);
    std::string left;
    for (const DeviceSkip& k : s.skipped) left += (left.empty() ? "" : ", ") + fmt::format("`{}`", k.spec);
    md += left.empty() ? ".\n\n" : fmt::format("; not run there (see results.json): {}.\n\n", left);
  }
  md += "| spec | K bytes | V bytes | ratio | bits/elem | perplexity | vs fp16 | KL | top-1 | retrieval "
        "| prefill tok/s | decode tok/s | KV held, peak | peak RSS MiB |\n";
  md +=
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const MethodEval& r = rows[i];
    const std::string spec = front[i] ? fmt::format("**`{}`**", r.spec) : fmt::format("`{}`", r.spec);
    md += fmt::format("| {} | {} | {} | {:.2f}x | {:.2f} | {:.3f} | {} | {:.4f} | {:.1f} % | {:.1f} % "
                      "| {:.0f} | {:.1f} | {} | {:.1f} |\n",
                      spec, r.key_bytes, r.value_bytes, r.compression_ratio(), r.bits_per_element(),
                      r.perplexity,
                      i == 0 ? std::string("—") : fmt::format("{:+.2f} %", r.perplexity_delta_pct), r.kl_mean,
                      100.0 * r.top1_agreement, 100.0 * r.retrieval_mean, r.prefill_tokens_per_s,
                      r.decode_tokens_per_s, r.kv_peak_held_bytes, r.peak_rss_mib);
  }
  if (!rows.empty() && !rows[0].retrieval.empty()) {
    md += "\nRetrieval by length @ depth:\n\n| spec |";
    for (const NeedleCell& c : rows[0].retrieval) md += fmt::format(" {} @ {:.2f} |", c.length, c.depth);
    md += "\n| --- |";
    for (size_t c = 0; c < rows[0].retrieval.size(); ++c) md += " ---: |";
    md += "\n";
    for (const MethodEval& r : rows) {
      md += fmt::format("| `{}` |", r.spec);
      for (const NeedleCell& c : r.retrieval) md += fmt::format(" {:.1f} % |", 100.0 * c.recall);
      md += "\n";
    }
  }
  if (!rows.empty() && !rows[0].tasks.empty()) {
    md +=
        fmt::format("\nLong-context tasks by length ({} sample{} each; score: the share of expected answers "
                    "found in the greedy answer):\n\n| spec | mean |",
                    s.task_samples, s.task_samples == 1 ? "" : "s");
    for (const LongTaskCell& c : rows[0].tasks) md += fmt::format(" {} @ {} |", c.task, c.length);
    md += "\n| --- | ---: |";
    for (size_t c = 0; c < rows[0].tasks.size(); ++c) md += " ---: |";
    md += "\n";
    for (const MethodEval& r : rows) {
      md += fmt::format("| `{}` | {:.1f} % |", r.spec, 100.0 * r.tasks_mean);
      for (const LongTaskCell& c : r.tasks) md += fmt::format(" {:.1f} % |", 100.0 * c.score);
      md += "\n";
    }
  }
  return md;
}

}  // namespace veloxquant
