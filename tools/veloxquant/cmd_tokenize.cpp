// `veloxquant tokenize -m FILE -p TEXT`: the token ids of a text, as llama.cpp's llama-tokenize
// prints them. Only the tokenizer is loaded, so a vocabulary-only GGUF (no tensors) is enough.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "run_stats.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant::cli {
namespace {

struct TokenizeArgs {
  std::string model, prompt, file;
  bool no_bos = false, no_parse_special = false, ids = false, show_count = false, json = false;
};

void run(const TokenizeArgs& a) {
  const Tokenizer tok = Tokenizer::load(a.model);
  const std::string text = a.file.empty() ? a.prompt : read_text(a.file);
  const std::vector<int32_t> ids = tok.encode(text, !a.no_bos, !a.no_parse_special);
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["tokens"] = ids.size();
    j["ids"] = ids;
    auto& pieces = j["pieces"] = nlohmann::ordered_json::array();
    for (const int32_t id : ids) pieces.push_back(tok.token_to_piece(id, /*special=*/true));
    // A piece may be part of a UTF-8 character; JSON strings cannot hold that, so such bytes
    // print as U+FFFD (the ids are exact).
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  if (a.ids) {
    fmt::print("[{}]\n", fmt::join(ids, ", "));
  } else {
    for (const int32_t id : ids) fmt::print("{:6} -> '{}'\n", id, tok.token_to_piece(id, true));
  }
  if (a.show_count) fmt::print("Total number of tokens: {}\n", ids.size());
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  auto* cmd = app.add_subcommand(
      "tokenize", "Print the token ids of a text, as llama.cpp's llama-tokenize does (a "
                  "vocabulary-only GGUF is enough)");
  cmd->add_option("-m,--model", a->model, "GGUF file with tokenizer.ggml.* metadata")->required();
  auto* text = cmd->add_option_group("text", "exactly one of");
  text->add_option("-p,--prompt", a->prompt, "text to tokenize, taken literally");
  text->add_option("-f,--file", a->file, "file whose bytes to tokenize, unchanged");
  text->require_option(1);
  cmd->add_flag("--no-bos", a->no_bos,
                "add neither the BOS nor the EOS token the vocabulary asks for");
  cmd->add_flag("--no-parse-special", a->no_parse_special,
                "tokenize the text of control tokens (e.g. <|im_start|>) as plain text");
  auto* ids = cmd->add_flag("--ids", a->ids, "print only the ids, as [1, 2, 3]");
  cmd->add_flag("--show-count", a->show_count, "print the number of tokens last");
  cmd->add_flag("--json", a->json, "print one JSON object: model, tokens, ids, pieces")
      ->excludes(ids);
  return [a] { run(*a); };
}

}  // namespace veloxquant::cli
