// veloxquant_tokenizer: trains the byte-level BPE vocabulary of the project's evaluation models
// and encodes their training text with the runtime's own tokenizer, so that the model is trained
// on exactly the ids the runtime will produce.
//   veloxquant_tokenizer train --vocab 4096 -o tokenizer.gguf TEXT...
//   veloxquant_tokenizer encode -t tokenizer.gguf -o tokens.u16 TEXT...
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "../dev/read_file.h"
#include "runtime/tokenizer/bpe_trainer.h"
#include "veloxquant/error.h"
#include "veloxquant/gguf.h"
#include "veloxquant/tokenizer.h"

namespace {

using namespace veloxquant;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Feeds the counter paragraph-sized pieces: the pre-tokenizer works on one piece at a time, and
// cutting at blank lines only splits a run of newlines that no merge would cross usefully.
void count_words(BpeWordCounts& counts, const std::string& text) {
  constexpr size_t kPiece = 1 << 20;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = begin + kPiece >= text.size() ? text.size() : text.find("\n\n", begin + kPiece);
    end = end == std::string::npos ? text.size() : end + 2;
    counts.add(std::string_view(text).substr(begin, end - begin));
    begin = end;
  }
}

void train(const std::vector<std::string>& inputs, size_t vocab, const std::string& pre,
           const std::string& out) {
  const auto t0 = std::chrono::steady_clock::now();
  BpeWordCounts counts(pre);
  size_t bytes = 0;
  for (const std::string& path : inputs) {
    const std::string text = dev::read_file(path);
    bytes += text.size();
    count_words(counts, text);
    fmt::print(stderr, "counted {} ({:.1f} MB so far, {} distinct words, {:.0f} s)\n", path,
               bytes / 1e6, counts.counts().size(), seconds_since(t0));
  }
  BpeTrainerOptions options;
  options.vocab_size = vocab;
  const TrainedBpe bpe = train_bpe(counts, options);
  if (bpe.tokens.size() < vocab) {
    throw Error(fmt::format("the text gave only {} tokens; expected {}: train on more text",
                            bpe.tokens.size(), vocab));
  }
  GgufWriter w;
  for (auto& [key, value] : bpe_tokenizer_metadata(bpe)) w.add_metadata(key, value);
  w.write_file(out);
  fmt::print(stderr, "wrote {}: {} tokens, {} merges, from {:.1f} MB in {:.0f} s\n", out,
             bpe.tokens.size(), bpe.merges.size(), bytes / 1e6, seconds_since(t0));
}

void encode(const std::vector<std::string>& inputs, const std::string& tokenizer_path,
            const std::string& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(tokenizer_path));
  if (tok.vocab_size() > 65536) {
    throw Error(fmt::format("{} has {} tokens; 16-bit token files hold at most 65536",
                            tokenizer_path, tok.vocab_size()));
  }
  std::ofstream o(out, std::ios::binary);
  if (!o) throw Error(fmt::format("cannot open '{}' for writing", out));
  size_t bytes = 0, tokens = 0;
  for (const std::string& path : inputs) {
    const std::string text = dev::read_file(path);
    const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false);
    std::vector<uint16_t> packed(ids.begin(), ids.end());  // little-endian on every target host
    o.write(reinterpret_cast<const char*>(packed.data()),
            static_cast<std::streamsize>(packed.size() * 2));
    bytes += text.size();
    tokens += ids.size();
  }
  if (!o.flush()) throw Error(fmt::format("writing '{}' failed", out));
  fmt::print(stderr, "wrote {}: {} tokens from {:.1f} MB ({:.2f} bytes per token) in {:.0f} s\n",
             out, tokens, bytes / 1e6, tokens ? double(bytes) / double(tokens) : 0.0,
             seconds_since(t0));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains the evaluation models' BPE tokenizer and encodes their training text"};
  app.require_subcommand(1);
  std::vector<std::string> inputs;
  std::string out, pre = "gpt-2", tokenizer;
  size_t vocab = 4096;

  CLI::App* train_cmd = app.add_subcommand("train", "Train a byte-level BPE vocabulary");
  train_cmd->add_option("inputs", inputs, "Text files (UTF-8)")->required();
  train_cmd->add_option("--vocab", vocab, "Vocabulary size, special tokens included")
      ->capture_default_str();
  train_cmd->add_option("--pre", pre, "Pre-tokenizer (a tokenizer.ggml.pre value)")
      ->capture_default_str();
  train_cmd->add_option("-o,--output", out, "Tokenizer GGUF to write")->required();

  CLI::App* encode_cmd = app.add_subcommand("encode", "Encode text to 16-bit token ids");
  encode_cmd->add_option("inputs", inputs, "Text files (UTF-8)")->required();
  encode_cmd->add_option("-t,--tokenizer", tokenizer, "GGUF holding the tokenizer")->required();
  encode_cmd->add_option("-o,--output", out, "Token file to write (little-endian uint16)")
      ->required();
  CLI11_PARSE(app, argc, argv);

  try {
    if (*train_cmd) train(inputs, vocab, pre, out);
    if (*encode_cmd) encode(inputs, tokenizer, out);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
