// veloxquant_task_templates: writes the long-context tasks of `eval --tasks` as training templates,
// so that an evaluation model can learn their format (train_llama.py --task-templates) and its task
// scores then measure what a KV cache keeps, not whether a small model can follow an instruction.
//   veloxquant_task_templates -m models/vq-hd128.gguf --text TRAIN.txt --count 4000 -o tasks.jsonl
//
// Each sample is built by eval's own generator from a filler of end-of-sequence tokens, which no
// fixed text of a task contains: the runs of them are the gaps the trainer fills with its own text.
// One JSON line per sample: {"task", "length", "parts": [[ids]...], "gaps": [n...], "answer": [ids]},
// the prompt being parts[0] (BOS first), gaps[0] text tokens, parts[1], ... and the answer the
// tokens of the expected strings as a model should say them. The keys, values and words come from
// the given text: use training text, never the text the tasks are evaluated on.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../dev/read_file.h"
#include "../dev/tool_main.h"
#include "eval/long_tasks.h"
#include "veloxquant/error.h"
#include "veloxquant/model.h"

namespace {

using namespace veloxquant;

// What a model that solved the task would say after the prompt's lead-in ("... is:").
std::string answer_text(const std::string& task, const std::vector<std::string>& answers) {
  if (task == "variable_tracking") {
    std::vector<std::string> named;
    for (const std::string& a : answers) named.push_back("VAR " + a);
    return fmt::format(" {}.", fmt::join(named, ", "));
  }
  return fmt::format(" {}.", fmt::join(answers, ", "));
}

// The prompt cut at its runs of `gap` tokens.
nlohmann::json split_at_gaps(const std::vector<int32_t>& prompt, int32_t gap) {
  nlohmann::json parts = nlohmann::json::array(), gaps = nlohmann::json::array();
  std::vector<int32_t> part;
  size_t run = 0;
  for (const int32_t t : prompt) {
    if (t == gap) {
      ++run;
      continue;
    }
    if (run > 0) {
      parts.push_back(part);
      gaps.push_back(run);
      part.clear();
      run = 0;
    }
    part.push_back(t);
  }
  if (run > 0) {
    parts.push_back(part);
    gaps.push_back(run);
    part.clear();
  }
  parts.push_back(part);
  return {{"parts", parts}, {"gaps", gaps}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes eval's long-context tasks as training templates (JSON lines)"};
  std::string model_path, text_path, out;
  std::vector<size_t> lengths{1024, 2048, 4096, 8192};
  size_t count = 1000;
  uint64_t seed = 1000;
  app.add_option("-m,--model", model_path, "a model with the tokenizer to write ids of")->required();
  app.add_option("--text", text_path, "training text the keys, values and words are drawn from")->required();
  app.add_option("--lengths", lengths, "sample lengths in tokens (prompt and answer), used in turn")
      ->delimiter(',');
  app.add_option("--count", count, "samples, the tasks in turn")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "seed of the samples; keep it apart from eval's (1)");
  app.add_option("-o,--out", out, "output file (JSON lines)")->required();
  return veloxquant::dev::run_tool(app, argc, argv, "veloxquant_task_templates", [&] {
    const Model model = Model::load(model_path);
    const Tokenizer& tok = model.tokenizer();
    const int32_t gap = tok.eos();
    if (gap < 0) throw Error(fmt::format("'{}' has no end-of-sequence token to mark gaps with", model_path));
    const std::vector<std::string> words = task_words(dev::read_file(text_path));
    const size_t longest = *std::max_element(lengths.begin(), lengths.end());
    const std::vector<int32_t> filler(longest, gap);
    const auto& tasks = long_task_names();
    std::ofstream file(out);
    if (!file) throw Error(fmt::format("cannot open '{}' for writing", out));
    for (size_t i = 0; i < count; ++i) {
      const std::string& task = tasks[i % tasks.size()];
      const size_t length = lengths[(i / tasks.size()) % lengths.size()];
      const LongTaskSample s = build_long_task(model, task, length, i, seed, filler, words);
      nlohmann::json line = split_at_gaps(s.prompt, gap);
      line["task"] = task;
      line["length"] = length;
      line["answer"] = tok.encode(answer_text(task, s.answers), /*add_special=*/false);
      file << line.dump() << '\n';
    }
    if (!file.flush()) throw Error(fmt::format("cannot write '{}'", out));
    fmt::print(stderr, "wrote {} task templates to {}\n", count, out);
    return 0;
  });
}
