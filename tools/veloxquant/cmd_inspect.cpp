// `veloxquant inspect MODEL`: what a GGUF file holds (version, metadata, tensor table, totals),
// read through the same bounds-checked reader the runtime uses.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "commands.h"
#include "veloxquant/gguf.h"

namespace veloxquant::cli {
namespace {

struct InspectArgs {
  std::string model;
  size_t items = 4;
};

// "[64, 512]": ggml order, the contiguous dimension first.
std::string shape_string(const GgufTensorInfo& t) { return fmt::format("[{}]", fmt::join(t.dims, ", ")); }

void print_metadata(const GgufFile& f, size_t items) {
  fmt::print("metadata: {} entries\n", f.metadata().size());
  size_t width = 0;
  for (const auto& [key, value] : f.metadata()) width = std::max(width, key.size());
  for (const auto& [key, value] : f.metadata()) {
    fmt::print("  {:<{}}  {:<8} {}\n", key, width, gguf_value_type_name(value.type()),
               value.to_string(items));
  }
}

void print_tensors(const GgufFile& f) {
  fmt::print("tensors: {} (shape in ggml order, contiguous dimension first)\n", f.tensors().size());
  size_t name_width = 4, shape_width = 5;
  for (const auto& t : f.tensors()) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, shape_string(t).size());
  }
  fmt::print("  {:<{}}  {:<7} {:<{}} {:>14} {:>12}\n", "name", name_width, "type", "shape",
             shape_width, "elements", "bytes");
  struct Total {
    size_t tensors = 0;
    uint64_t elements = 0, bytes = 0;
  };
  std::map<std::string, Total> by_type;
  Total all;
  for (const auto& t : f.tensors()) {
    fmt::print("  {:<{}}  {:<7} {:<{}} {:>14} {:>12}\n", t.name, name_width, ggml_type_name(t.type),
               shape_string(t), shape_width, t.elements, t.bytes);
    for (Total* total : {&by_type[ggml_type_name(t.type)], &all}) {
      ++total->tensors;
      total->elements += t.elements;
      total->bytes += t.bytes;
    }
  }
  for (const auto& [type, total] : by_type) {
    fmt::print("total {}: {} tensors, {} elements, {} bytes\n", type, total.tensors,
               total.elements, total.bytes);
  }
  fmt::print("total: {} tensors, {} elements, {} bytes ({:.2f} MiB)\n", all.tensors, all.elements,
             all.bytes, static_cast<double>(all.bytes) / (1024.0 * 1024.0));
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "Show a GGUF model's version, metadata and tensors");
  cmd->add_option("model", args->model, "path of the .gguf file")->required();
  cmd->add_option("--items", args->items, "array items shown per metadata array")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  return [args] {
    const GgufFile f = GgufFile::open(args->model);
    fmt::print("{}: GGUF version {}, {} bytes, alignment {}, tensor data at offset {}\n",
               args->model, f.version(), f.file_size(), f.alignment(), f.data_offset());
    print_metadata(f, args->items);
    print_tensors(f);
  };
}

}  // namespace veloxquant::cli
