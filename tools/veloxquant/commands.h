// Subcommands of the veloxquant CLI. Each registers its options on the app and returns the
// function that runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace veloxquant::cli {

using Command = std::function<void()>;

Command add_methods_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_inspect_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_perplexity_command(CLI::App& app);
Command add_recall_command(CLI::App& app);
Command add_session_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_precompute_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_serve_command(CLI::App& app);

}  // namespace veloxquant::cli
