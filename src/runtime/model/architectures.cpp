#include <string>

#include "runtime/model/architecture.h"
#include "veloxquant/gguf.h"
#include "veloxquant/model.h"

namespace veloxquant::runtime {

extern const Architecture kLlama;  // arch_llama.cpp
extern const Architecture kQwen2;  // arch_qwen2.cpp

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> all{&kLlama, &kQwen2};
  return all;
}

const Architecture& find_architecture(std::string_view name) {
  std::string supported;
  for (const Architecture* a : architectures()) {
    if (a->name == name) return *a;
    supported += (supported.empty() ? "" : ", ") + std::string(a->name);
  }
  throw FormatError("architecture '" + std::string(name) + "' is not supported; supported: " +
                    supported);
}

}  // namespace veloxquant::runtime

namespace veloxquant {

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const runtime::Architecture* a : runtime::architectures()) names.emplace_back(a->name);
  return names;
}

}  // namespace veloxquant
