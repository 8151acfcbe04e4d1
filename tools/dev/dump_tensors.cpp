// veloxquant_dump_tensors: decodes tensors of a GGUF file with the library's dequantize() and
// writes each as a float32 .npy named after it, for comparison with llama.cpp's numpy reference
// (gguf.quants.dequantize; tests/python/test_block_formats.py).
//   veloxquant_dump_tensors FILE.gguf --out DIR [--tensor NAME ...]
// Without --tensor every tensor is written. An array keeps the tensor's shape, outermost first.
// Errors print one line on stderr and exit with code 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "npy.h"
#include "tool_main.h"
#include "veloxquant/gguf.h"

int main(int argc, char** argv) {
  CLI::App app{"Write GGUF tensors, decoded to f32, as .npy files"};
  std::string path, out;
  std::vector<std::string> names;
  app.add_option("file", path, "path of the .gguf file")->required();
  app.add_option("--out", out, "folder for the .npy files (created if absent)")->required();
  app.add_option("--tensor", names, "a tensor to write (repeatable; default: all)");
  return veloxquant::dev::run_tool(app, argc, argv, "veloxquant_dump_tensors", [&] {
    const veloxquant::GgufFile file = veloxquant::GgufFile::open(path);
    if (names.empty())
      for (const auto& t : file.tensors()) names.push_back(t.name);
    std::filesystem::create_directories(out);
    for (const std::string& name : names) {
      const veloxquant::GgufTensorInfo& t = file.tensor(name);
      const std::vector<size_t> shape(t.dims.rbegin(), t.dims.rend());
      veloxquant::dev::write_npy_f32((std::filesystem::path(out) / (name + ".npy")).string(),
                                     file.tensor_f32(t), shape);
    }
    return 0;
  });
}
