// veloxquant_dequantize_gguf: copies a GGUF file with every quantized tensor decoded to F32 (the
// library's dequantize(), llama.cpp's arithmetic); metadata and float tensors are kept as they are.
//   veloxquant_dequantize_gguf IN.gguf OUT.gguf
// The CPU runtime rounds the inputs of quantized products to int8 (runtime/weights/weight_matrix.h)
// and the GPU's f32 mode does not: on the copy, the CPU computes what `--device cuda --gpu-weights
// f32` computes on the original, which is how bench/cuda checks the GPU against the CPU.
// Errors print one line on stderr and exit with code 2.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tool_main.h"
#include "veloxquant/gguf.h"

namespace {

bool float_type(veloxquant::GgmlType t) {
  using veloxquant::GgmlType;
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Copy a GGUF file with its quantized tensors decoded to F32"};
  std::string in, out;
  app.add_option("in", in, "path of the .gguf file to read")->required();
  app.add_option("out", out, "path of the .gguf file to write")->required();
  return veloxquant::dev::run_tool(app, argc, argv, "veloxquant_dequantize_gguf", [&] {
    const veloxquant::GgufFile file = veloxquant::GgufFile::open(in);
    veloxquant::GgufWriter writer;
    for (const auto& [key, value] : file.metadata()) writer.add_metadata(key, value);
    for (const veloxquant::GgufTensorInfo& t : file.tensors()) {
      if (float_type(t.type)) {
        const auto bytes = file.tensor_data(t);
        writer.add_tensor(t.name, t.type, t.dims, {bytes.begin(), bytes.end()});
        continue;
      }
      const std::vector<float> values = file.tensor_f32(t);
      const auto* raw = reinterpret_cast<const uint8_t*>(values.data());
      writer.add_tensor(t.name, veloxquant::GgmlType::F32, t.dims,
                        {raw, raw + values.size() * sizeof(float)});
    }
    writer.write_file(out);
    return 0;
  });
}
