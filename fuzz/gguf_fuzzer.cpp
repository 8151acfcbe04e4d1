// Fuzz target: GgufFile::parse on arbitrary bytes, then everything a loader touches afterwards
// (metadata lookups and renderings, tensor infos, raw and decoded tensor data), then Model's
// loader (architectures, hyperparameters, fused tensors, block scales, the tokenizer) and, for a
// model that loads, one token through an fp16 session. Bad files must end in FormatError (or
// Error); anything else (a crash, a sanitizer report, another exception type escaping) is a
// finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "veloxquant/gguf.h"
#include "veloxquant/model.h"

namespace {

// Decoding a tensor allocates 4 bytes per element; a small file may describe a large tensor of a
// dense quantized type legally, so bound the work per input instead of the file.
constexpr uint64_t kMaxDecodedElements = uint64_t{1} << 20;
// A session's buffers follow the model's widths and context, which a small file may state large.
constexpr size_t kMaxSessionParameters = size_t{1} << 20;

void touch(const veloxquant::GgufValue& v) {
  (void)v.to_string();
  (void)v.as_integer();
  if (v.is<veloxquant::GgufValue::Array>()) {
    for (const auto& item : v.as<veloxquant::GgufValue::Array>("fuzz").items) touch(item);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = veloxquant::GgufFile::parse(std::vector<uint8_t>(data, data + size));
    for (const auto& [key, value] : file.metadata()) {
      touch(value);
      if (file.find(key) == nullptr) __builtin_trap();  // every key read must be found again
    }
    for (const auto& t : file.tensors()) {
      if (file.find_tensor(t.name) != &t) __builtin_trap();
      const auto bytes = file.tensor_data(t);
      if (bytes.size() != t.bytes) __builtin_trap();
      if (t.elements <= kMaxDecodedElements && veloxquant::ggml_type_decodable(t.type)) {
        (void)file.tensor_f32(t);
      }
    }
    const veloxquant::Model model = veloxquant::Model::from_gguf(file);
    const veloxquant::ModelConfig& c = model.config();
    if (model.parameter_count() <= kMaxSessionParameters && c.context_length <= 4096 &&
        size_t{c.feed_forward} * c.embedding <= kMaxSessionParameters) {
      veloxquant::Session session(model, {.kv_spec = "fp16", .context = 8});
      (void)session.eval(std::vector<int32_t>{0}, veloxquant::Logits::Last);
    }
  } catch (const veloxquant::Error&) {
    // The expected outcome for malformed files.
  }
  return 0;
}
