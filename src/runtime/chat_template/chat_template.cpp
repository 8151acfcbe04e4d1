// The public ChatTemplate: parsing once, rendering with the variables transformers passes to a
// chat template (messages, tools, documents, add_generation_prompt, bos_token, eos_token).
#include "veloxquant/chat_template.h"

#include <nlohmann/json.hpp>

#include "runtime/chat_template/json_value.h"
#include "runtime/chat_template/parser.h"
#include "veloxquant/gguf.h"

namespace veloxquant {

using chat_template::Value;

struct ChatTemplate::Impl {
  std::string source, bos_token, eos_token;
  chat_template::Body body;
};

ChatTemplate::ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(const ChatTemplate&) = default;
ChatTemplate& ChatTemplate::operator=(const ChatTemplate&) = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

const std::string& ChatTemplate::source() const { return impl_->source; }
const std::string& ChatTemplate::bos_token() const { return impl_->bos_token; }
const std::string& ChatTemplate::eos_token() const { return impl_->eos_token; }

ChatTemplate ChatTemplate::parse(std::string_view source, std::string bos_token, std::string eos_token) {
  auto impl = std::make_shared<Impl>();
  impl->source = std::string(source);
  impl->bos_token = std::move(bos_token);
  impl->eos_token = std::move(eos_token);
  try {
    impl->body = chat_template::parse_template(source);
  } catch (const chat_template::RenderFailure& failure) {
    // A literal the parser folds (e.g. a too-deep list) can fail like a render does.
    throw ChatTemplateError("chat template: " + failure.message);
  }
  return ChatTemplate(std::move(impl));
}

namespace {

// The text of the token whose id the key holds; empty when the key is absent or out of range.
std::string token_text(const GgufFile& file, std::string_view id_key) {
  const GgufValue* id = file.find(id_key);
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (!id || !tokens || !tokens->is<GgufValue::Array>()) return "";
  const std::optional<int64_t> index = id->as_integer();
  const auto& items = tokens->as<GgufValue::Array>("tokenizer.ggml.tokens").items;
  if (!index || *index < 0 || static_cast<uint64_t>(*index) >= items.size()) return "";
  if (!items[static_cast<size_t>(*index)].is<std::string>()) return "";
  return items[static_cast<size_t>(*index)].as<std::string>("tokenizer.ggml.tokens");
}

// JSON text to a value; `what` names it in the error.
Value parse_json(std::string_view text, const char* what) {
  nlohmann::ordered_json json;
  try {
    json = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("chat template: ") + what + " is not valid JSON: " + e.what());
  }
  try {
    return chat_template::from_json(json);
  } catch (const chat_template::RenderFailure& failure) {
    throw Error(std::string("chat template: ") + what + ": " + failure.message);
  }
}

}  // namespace

ChatTemplate ChatTemplate::from_gguf(const GgufFile& file, std::string_view name) {
  const std::string key = name.empty() ? "tokenizer.chat_template"
                                       : "tokenizer.chat_template." + std::string(name);
  const std::string& source = file.get<std::string>(key);
  return parse(source, token_text(file, "tokenizer.ggml.bos_token_id"),
               token_text(file, "tokenizer.ggml.eos_token_id"));
}

std::string ChatTemplate::render(std::string_view messages_json, const ChatTemplateOptions& options) const {
  const Value messages = parse_json(messages_json, "messages");
  if (!messages.is_list())
    throw Error("chat template: messages must be a JSON array, got " + type_name(messages));
  const Value tools = options.tools_json.empty() ? Value(chat_template::None{})
                                                 : parse_json(options.tools_json, "tools");
  const Value extra = options.extra_context_json.empty()
                          ? chat_template::make_dict({})
                          : parse_json(options.extra_context_json, "extra context");
  if (!extra.is_dict())
    throw Error("chat template: extra context must be a JSON object, got " + type_name(extra));

  chat_template::RenderState state;
  chat_template::Scope* globals = state.new_scope(nullptr);
  chat_template::install_globals(*globals);
  chat_template::Scope* context = state.new_scope(globals);
  context->set("messages", messages);
  context->set("tools", tools);
  context->set("documents", Value(chat_template::None{}));
  context->set("add_generation_prompt", options.add_generation_prompt);
  context->set("bos_token", impl_->bos_token);
  context->set("eos_token", impl_->eos_token);
  for (const auto& [key, value] : extra.as_dict().items) context->set(key.as_string(), value);

  std::string out;
  chat_template::Frame frame{state, context, out};
  try {
    chat_template::exec_body(impl_->body, frame);
  } catch (const chat_template::RenderFailure& failure) {
    const std::string where = "chat template line " + std::to_string(failure.line) + ": ";
    if (failure.raised)
      throw ChatTemplateRaised(where + "raise_exception: " + failure.message, failure.message);
    throw ChatTemplateError(where + failure.message);
  }
  return out;
}

}  // namespace veloxquant
