// veloxquant_render_chat: renders chat messages with a chat template, for the jinja2 oracle test
// (tests/python/test_chat_template.py).
//   veloxquant_render_chat (--template FILE | --gguf FILE [--name NAME]) --messages FILE
//       [--tools FILE] [--context FILE] [--bos TEXT] [--eos TEXT] [--no-generation-prompt]
// Prints the rendered text, nothing added. --gguf reads tokenizer.chat_template (or
// tokenizer.chat_template.NAME) and the vocabulary's BOS/EOS texts, which --bos/--eos override.
// Exits 3 when the template itself raises (raise_exception), 2 on any other error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "read_file.h"
#include "tool_main.h"
#include "veloxquant/chat_template.h"
#include "veloxquant/gguf.h"

int main(int argc, char** argv) {
  CLI::App app{"Render chat messages with a chat template"};
  std::string template_path, gguf_path, name, messages_path, tools_path, context_path;
  std::optional<std::string> bos, eos;
  bool no_generation_prompt = false;
  auto* source = app.add_option("--template", template_path, "a file holding the Jinja template");
  app.add_option("--gguf", gguf_path, "a GGUF file whose tokenizer.chat_template to use")->excludes(source);
  app.add_option("--name", name, "a named template of the GGUF (tokenizer.chat_template.NAME)");
  app.add_option("--messages", messages_path, "a JSON file holding the messages array")->required();
  app.add_option("--tools", tools_path, "a JSON file holding the tools array");
  app.add_option("--context", context_path, "a JSON file holding an object of extra template variables");
  app.add_option("--bos", bos, "the bos_token text");
  app.add_option("--eos", eos, "the eos_token text");
  app.add_flag("--no-generation-prompt", no_generation_prompt, "add_generation_prompt = false");
  return veloxquant::dev::run_tool(app, argc, argv, "veloxquant_render_chat", [&] {
    try {
      if (template_path.empty() == gguf_path.empty())
        throw veloxquant::Error("give either --template or --gguf");
      veloxquant::ChatTemplate chat =
          template_path.empty()
              ? veloxquant::ChatTemplate::from_gguf(veloxquant::GgufFile::open(gguf_path), name)
              : veloxquant::ChatTemplate::parse(veloxquant::dev::read_file(template_path));
      if (bos || eos)
        chat = veloxquant::ChatTemplate::parse(chat.source(), bos.value_or(chat.bos_token()),
                                               eos.value_or(chat.eos_token()));
      veloxquant::ChatTemplateOptions options;
      options.add_generation_prompt = !no_generation_prompt;
      if (!tools_path.empty()) options.tools_json = veloxquant::dev::read_file(tools_path);
      if (!context_path.empty()) options.extra_context_json = veloxquant::dev::read_file(context_path);
      const std::string text = chat.render(veloxquant::dev::read_file(messages_path), options);
      std::fwrite(text.data(), 1, text.size(), stdout);
    } catch (const veloxquant::ChatTemplateRaised& e) {
      std::fprintf(stderr, "veloxquant_render_chat: %s\n", e.what());
      return 3;
    }
    return 0;
  });
}
