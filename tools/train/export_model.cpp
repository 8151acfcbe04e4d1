// veloxquant_export_model: writes a trained evaluation model as a GGUF file with the project's
// own writer, under llama.cpp's tensor names and metadata keys, so that the runtime (and
// llama.cpp) load it like any converted Llama model.
//   veloxquant_export_model --weights DIR --report NAME.json --tokenizer tokenizer.gguf
//                           --type q8_0 -o models/NAME.gguf
// DIR holds one .npy per tensor, named by its GGUF name (tools/train/unpack_checkpoint.py writes
// them from the training shards); NAME.json is the training report train_llama.py writes.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llama_metadata.h"
#include "npy.h"
#include "veloxquant/error.h"
#include "veloxquant/gguf.h"

namespace {

using namespace veloxquant;

struct Expected {
  std::string name;
  std::vector<size_t> shape;  // as stored by PyTorch: [out, in]
};

std::vector<Expected> expected_tensors(const dev::LlamaHyperparameters& h, size_t vocab) {
  const size_t d = h.width, q = size_t{h.heads} * h.head_dim, kv = size_t{h.kv_heads} * h.head_dim;
  std::vector<Expected> t = {{"token_embd.weight", {vocab, d}}, {"output_norm.weight", {d}}};
  for (uint32_t l = 0; l < h.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    t.push_back({p + "attn_norm.weight", {d}});
    t.push_back({p + "attn_q.weight", {q, d}});
    t.push_back({p + "attn_k.weight", {kv, d}});
    t.push_back({p + "attn_v.weight", {kv, d}});
    t.push_back({p + "attn_output.weight", {d, q}});
    t.push_back({p + "ffn_norm.weight", {d}});
    t.push_back({p + "ffn_gate.weight", {h.ffn, d}});
    t.push_back({p + "ffn_up.weight", {h.ffn, d}});
    t.push_back({p + "ffn_down.weight", {d, h.ffn}});
  }
  return t;
}

std::string shape_string(const std::vector<size_t>& s) {
  std::string out;
  for (size_t d : s) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "[" + out + "]";
}

uint32_t read_u32(const nlohmann::json& config, const char* key) {
  if (!config.contains(key) || !config[key].is_number_unsigned())
    throw Error(fmt::format("training report: config.{} is missing or not a positive integer", key));
  return config[key].get<uint32_t>();
}

void export_model(const std::string& weights_dir, const std::string& report_path,
                  const std::string& tokenizer_path, const std::string& type_name,
                  const std::string& out) {
  std::ifstream report_file(report_path);
  if (!report_file) throw Error(fmt::format("cannot open training report '{}'", report_path));
  const nlohmann::json report = nlohmann::json::parse(report_file);
  const nlohmann::json& c = report.at("config");

  dev::LlamaHyperparameters h;
  h.layers = read_u32(c, "layers");
  h.context = read_u32(c, "context");
  h.width = read_u32(c, "dim");
  h.ffn = read_u32(c, "ffn");
  h.heads = read_u32(c, "heads");
  h.kv_heads = read_u32(c, "kv_heads");
  h.head_dim = read_u32(c, "head_dim");
  h.rms_eps = c.at("rms_eps").get<float>();
  h.rope_base = c.at("rope_base").get<float>();
  const uint32_t vocab = read_u32(c, "vocab");
  if (!c.at("tied").get<bool>()) throw Error("training report: only tied output projections are exported");

  const GgmlType matrix_type = type_name == "f16" ? GgmlType::F16
                               : type_name == "q8_0" ? GgmlType::Q8_0
                                                     : throw Error(fmt::format(
                                                           "--type {}: expected f16 or q8_0", type_name));
  GgufWriter w;
  const std::string name = fmt::format("VeloxQuant {}", report.at("name").get<std::string>());
  for (auto& [key, value] : dev::llama_metadata(h, matrix_type, name)) w.add_metadata(key, value);
  w.add_metadata("general.description",
                 GgufValue(fmt::format("Evaluation model trained by tools/train/train_llama.py: "
                                       "{} steps of {} windows of {} tokens, seed {}, valid loss {}",
                                       report.at("steps").get<int>(), report.at("batch").get<int>(),
                                       h.context, report.at("seed").get<int>(),
                                       report.at("valid_loss").get<double>())));
  const GgufFile tokenizer = GgufFile::open(tokenizer_path);
  for (const auto& [key, value] : tokenizer.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.add_metadata(key, value);
  }
  const auto& tokens = tokenizer.get<GgufValue::Array>("tokenizer.ggml.tokens");
  if (tokens.items.size() != vocab) {
    throw Error(fmt::format("{} has {} tokens; the model was trained with {}", tokenizer_path,
                            tokens.items.size(), vocab));
  }

  for (const Expected& e : expected_tensors(h, vocab)) {
    const std::string path = (std::filesystem::path(weights_dir) / (e.name + ".npy")).string();
    const dev::NpyArray a = dev::read_npy(path);
    if (a.shape != e.shape) {
      throw Error(fmt::format("{}: shape {}; expected {}", path, shape_string(a.shape),
                              shape_string(e.shape)));
    }
    // ggml lists dims innermost first: a PyTorch [out, in] matrix is GGUF [in, out], same bytes.
    std::vector<uint64_t> dims(e.shape.rbegin(), e.shape.rend());
    const GgmlType type = e.shape.size() == 2 ? matrix_type : GgmlType::F32;
    w.add_tensor(e.name, type, std::move(dims), encode_weights(type, a.data));
  }
  w.write_file(out);
  fmt::print("wrote {} ({:.2f} MB): {} layers, width {}, {} heads / {} KV heads of {}, {} matrices\n",
             out, std::filesystem::file_size(out) / 1e6, h.layers, h.width, h.heads, h.kv_heads,
             h.head_dim, type_name);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes a trained evaluation model as GGUF"};
  std::string weights, report, tokenizer, type = "q8_0", out;
  app.add_option("--weights", weights, "Folder of <tensor name>.npy files")->required();
  app.add_option("--report", report, "Training report (NAME.json)")->required();
  app.add_option("--tokenizer", tokenizer, "GGUF holding the tokenizer")->required();
  app.add_option("--type", type, "Matrix type: f16 or q8_0")->capture_default_str();
  app.add_option("-o,--output", out, "GGUF file to write")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    export_model(weights, report, tokenizer, type, out);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
