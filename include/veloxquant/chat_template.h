// Chat templates: renders a model's `tokenizer.chat_template` (a Jinja template written for
// Hugging Face transformers) for a list of chat messages, byte for byte as transformers'
// apply_chat_template does with jinja2. The engine implements the subset of Jinja that chat
// templates use (docs/chat_template.md); anything else fails with an error naming it and its line.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "veloxquant/error.h"

namespace veloxquant {

class GgufFile;

// A template that cannot be parsed or fails while rendering (unknown filter, a type error, an
// undefined value used where jinja2 raises). The message starts "chat template line N: ".
class ChatTemplateError : public Error {
 public:
  using Error::Error;
};

// The template itself called raise_exception(message), e.g. on roles that do not alternate: the
// request is at fault, not the template. message() is the template's text, unchanged.
class ChatTemplateRaised : public ChatTemplateError {
 public:
  ChatTemplateRaised(const std::string& what, std::string message)
      : ChatTemplateError(what), message_(std::move(message)) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

struct ChatTemplateOptions {
  // Ends the prompt with the assistant's turn header, so the model answers next.
  bool add_generation_prompt = true;
  // The OpenAI `tools` array as JSON text; empty means none (the template sees `tools` = None,
  // as transformers passes it).
  std::string tools_json;
  // A JSON object whose keys become further template variables (e.g. {"enable_thinking": false},
  // {"documents": [...]}); they may override bos_token and eos_token too. Empty means none.
  std::string extra_context_json;
};

class ChatTemplate {
 public:
  // Parses `source`; bos_token and eos_token are the texts the template sees as such. Throws
  // ChatTemplateError naming the line for a syntax error or an unsupported construct.
  static ChatTemplate parse(std::string_view source, std::string bos_token = "", std::string eos_token = "");
  // The file's `tokenizer.chat_template` (or `tokenizer.chat_template.<name>` when `name` is
  // given, e.g. "tool_use"), with the texts of its tokenizer.ggml.bos/eos_token_id tokens.
  // Throws FormatError naming the key when the file has no such template, and ChatTemplateError
  // when it does not parse.
  static ChatTemplate from_gguf(const GgufFile& file, std::string_view name = "");

  // Renders `messages_json`, a JSON array of messages (objects with "role", "content" and
  // whatever else the template reads: "tool_calls", content parts, ...). Throws Error for
  // malformed JSON, ChatTemplateRaised when the template raises, ChatTemplateError otherwise.
  // Output is limited to 64 MiB, loops to a million iterations in all and macro calls to 100 deep.
  std::string render(std::string_view messages_json, const ChatTemplateOptions& options = {}) const;

  const std::string& source() const;
  const std::string& bos_token() const;
  const std::string& eos_token() const;

  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&);
  ChatTemplate& operator=(const ChatTemplate&);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

 private:
  struct Impl;
  explicit ChatTemplate(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;  // immutable once parsed, so copies share it across threads
};

}  // namespace veloxquant
