// veloxquant_make_fixture: writes a small random-weight model of a supported architecture as GGUF, with
// llama.cpp's tensor names and metadata, for the runtime's tests (see fixture_model.h).
//   veloxquant_make_fixture --arch ARCH --type f32|f16|bf16|q8_0|q4_0 [--tied]
//       [--seed N] [--rope-scale FACTOR [--rope-scaling linear|yarn]]
//       [--vocab VOCAB.gguf] [--manifest FILE.json]
//       [--width W --heads H --kv-heads K --head-dim D --ffn F --layers L --context C] OUT.gguf
// Errors print one line on stderr and exit with code 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "fixture_model.h"
#include "manifest.h"
#include "tool_main.h"
#include "veloxquant/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Write a small random-weight Llama-family GGUF model"};
  veloxquant::dev::FixtureOptions options;
  std::string type = "f32", out, manifest_path;
  app.add_option("--arch", options.arch, "llama, qwen2, qwen3, phi3, mistral3, gemma2, gemma3 or gemma4")
      ->capture_default_str();
  app.add_option("--type", type, "type of the weight matrices: f32, f16, bf16, q8_0 or q4_0")
      ->capture_default_str();
  app.add_flag("--tied", options.tied, "no output.weight: the output reuses token_embd");
  app.add_option("--seed", options.seed, "seed of the random weights")->capture_default_str();
  app.add_option("--rope-scale", options.rope_scale, "write RoPE scaling with this factor (0: none)")
      ->capture_default_str();
  app.add_option("--rope-scaling", options.rope_scaling, "the scaling --rope-scale writes: linear or yarn")
      ->capture_default_str();
  app.add_option("--vocab", options.vocab_file,
                 "take the tokenizer (every tokenizer.* key) from this GGUF, e.g. a ggml-vocab-*.gguf");
  app.add_option("--manifest", manifest_path, "also write a JSON description of the file here");
  auto& shape = options.shape;
  app.add_option("--width", shape.width, "model width")->capture_default_str();
  app.add_option("--heads", shape.heads, "query heads")->capture_default_str();
  app.add_option("--kv-heads", shape.kv_heads, "KV heads")->capture_default_str();
  app.add_option("--head-dim", shape.head_dim, "head dimension")->capture_default_str();
  app.add_option("--ffn", shape.ffn, "SwiGLU hidden width")->capture_default_str();
  app.add_option("--layers", shape.layers, "layers")->capture_default_str();
  app.add_option("--context", shape.context, "context length written to the metadata")->capture_default_str();
  app.add_option("out", out, "path of the .gguf file to write")->required();
  return veloxquant::dev::run_tool(app, argc, argv, "veloxquant_make_fixture", [&] {
    options.type = veloxquant::dev::parse_weight_type(type);
    const auto fixture = veloxquant::dev::make_fixture(options);
    veloxquant::dev::write_gguf(fixture, out);
    if (!manifest_path.empty()) {
      std::ofstream f(manifest_path);
      f << veloxquant::dev::manifest(options, fixture).dump(1) << '\n';
      if (!f.flush()) throw veloxquant::Error("cannot write manifest " + manifest_path);
    }
    return 0;
  });
}
