// veloxquant: KV-cache compression methods, benchmarks and a model runtime.
// Errors print one line on stderr and exit with code 2.
#include <cstdio>
#include <exception>
#include <map>

#include "commands.h"
#include "veloxquant/error.h"

int main(int argc, char** argv) {
  CLI::App app{"VeloxQuant: KV-cache compression for long-context LLM inference"};
  app.set_version_flag("--version", "veloxquant " VELOXQUANT_VERSION);
  app.require_subcommand(1);
  std::map<CLI::App*, veloxquant::cli::Command> commands;
  auto add = [&](auto factory) {
    const size_t before = app.get_subcommands({}).size();
    auto run = factory(app);
    commands[app.get_subcommands({})[before]] = run;
  };
  add(veloxquant::cli::add_methods_command);
  add(veloxquant::cli::add_bench_command);
  add(veloxquant::cli::add_generate_command);
  add(veloxquant::cli::add_perplexity_command);
  add(veloxquant::cli::add_recall_command);
  add(veloxquant::cli::add_eval_command);
  add(veloxquant::cli::add_inspect_command);
  add(veloxquant::cli::add_tokenize_command);
  add(veloxquant::cli::add_session_command);
  add(veloxquant::cli::add_calibrate_command);
  add(veloxquant::cli::add_precompute_command);
  add(veloxquant::cli::add_serve_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "veloxquant: %s\n", e.what());
    return 2;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "veloxquant: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
