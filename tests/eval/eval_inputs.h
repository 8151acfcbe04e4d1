// The inputs of the eval tests that run a model over text: the project's vq-hd128 model and the
// head of WikiText-2's test split.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "veloxquant/model.h"

namespace veloxquant::test {

inline const std::string kEvalModel = VELOXQUANT_MODELS_DIR "/vq-hd128.gguf";
inline const std::string kEvalText = VELOXQUANT_SHARED_DIR "/corpus/wikitext-2-raw/wiki.test.raw";

// The first input that is not on disk (the test skips naming it); empty when both are.
inline std::string missing_eval_input() {
  for (const std::string& path : {kEvalModel, kEvalText})
    if (!std::filesystem::exists(path)) return path;
  return "";
}

// The first `bytes` bytes of the text.
inline std::string eval_text_head(size_t bytes) {
  std::ifstream f(kEvalText, std::ios::binary);
  std::string text(bytes, '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

// The model, loaded once for every test that uses it (when missing_eval_input() is empty).
inline const Model& eval_model() {
  static const Model model = Model::load(kEvalModel);
  return model;
}

// The first `bytes` bytes of the text as the model's tokens, without BOS.
inline std::vector<int32_t> eval_text_tokens(size_t bytes) {
  return eval_model().tokenizer().encode(eval_text_head(bytes), /*add_special=*/false);
}

}  // namespace veloxquant::test
