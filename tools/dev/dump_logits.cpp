// veloxquant_dump_logits: runs the runtime's forward pass over a token list and writes every
// position's logits as a [n, vocab] float32 .npy, for comparison with the numpy reference model
// (tests/python/reference_model.py).
//   veloxquant_dump_logits MODEL.gguf --tokens 1,2,3 --out FILE.npy [--kv SPEC] [--decode]
//       [--device cpu|cuda] [--gpu-weights f16|f32]
// Without --decode the tokens go through one batched eval (prefill); with it, one eval per token
// (decode steps), which must give the same logits. Several sequences of equal length separated by
// ';' (--tokens '1,2,3;4,5,6') run as one batched session (device cuda) and give [batch, n, vocab].
// Errors print one line on stderr and exit with code 2.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "npy.h"
#include "tool_main.h"
#include "veloxquant/error.h"
#include "veloxquant/model.h"

namespace {

std::vector<int32_t> parse_sequence(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    size_t used = 0;
    long value = -1;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 0 || value > INT32_MAX)
      throw veloxquant::Error("--tokens: '" + item + "' is not a token id; expected a comma-separated "
                              "list of integers >= 0");
    ids.push_back(static_cast<int32_t>(value));
    start = comma + 1;
  }
  return ids;
}

// Sequences separated by ';', all of one length: [batch, n] row-major, and the batch.
std::vector<int32_t> parse_tokens(const std::string& text, size_t& batch) {
  std::vector<int32_t> ids;
  size_t start = 0, length = 0;
  batch = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    const std::vector<int32_t> seq = parse_sequence(text.substr(start, end - start));
    if (batch > 0 && seq.size() != length) {
      throw veloxquant::Error("--tokens: sequence " + std::to_string(batch) + " holds " + std::to_string(seq.size()) +
                              " tokens; expected " + std::to_string(length) + " like the first");
    }
    length = seq.size();
    ids.insert(ids.end(), seq.begin(), seq.end());
    ++batch;
    start = end + 1;
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a model's logits for a token list as a .npy file"};
  std::string model_path, tokens_text, out, kv = "fp16", device = "cpu", gpu_weights = "f16";
  bool decode = false;
  app.add_option("model", model_path, "path of the .gguf model")->required();
  app.add_option("--tokens", tokens_text, "comma-separated token ids; ';' between the sequences of a batch")->required();
  app.add_option("--out", out, "path of the .npy file to write")->required();
  app.add_option("--kv", kv, "KV cache spec")->capture_default_str();
  app.add_flag("--decode", decode, "evaluate one token at a time instead of one batch");
  app.add_option("--device", device, "cpu or cuda")->capture_default_str();
  app.add_option("--gpu-weights", gpu_weights, "with --device cuda: f16 or f32")->capture_default_str();
  return veloxquant::dev::run_tool(app, argc, argv, "veloxquant_dump_logits", [&] {
    size_t batch = 1;
    const std::vector<int32_t> tokens = parse_tokens(tokens_text, batch);
    const size_t n = tokens.size() / batch;
    veloxquant::Model model = veloxquant::Model::load(model_path);
    const size_t vocab = model.config().vocab;
    veloxquant::Session session(std::move(model), {.kv_spec = kv,
                                                   .context = 0,
                                                   .device = veloxquant::parse_device(device),
                                                   .gpu_weights = veloxquant::parse_gpu_weights(gpu_weights),
                                                   .batch = batch});
    std::vector<float> logits(batch * n * vocab);
    if (decode) {  // step i: token i of every sequence; its logits go to row i of each
      std::vector<int32_t> step(batch);
      for (size_t i = 0; i < n; ++i) {
        for (size_t b = 0; b < batch; ++b) step[b] = tokens[b * n + i];
        const std::vector<float> rows = session.eval_batch(step, veloxquant::Logits::Last);
        for (size_t b = 0; b < batch; ++b)
          std::copy_n(&rows[b * vocab], vocab, &logits[(b * n + i) * vocab]);
      }
    } else {
      logits = session.eval_batch(tokens, veloxquant::Logits::All);
    }
    if (batch == 1) {
      const size_t shape[] = {n, vocab};
      veloxquant::dev::write_npy_f32(out, logits, shape);
    } else {
      const size_t shape[] = {batch, n, vocab};
      veloxquant::dev::write_npy_f32(out, logits, shape);
    }
    return 0;
  });
}
