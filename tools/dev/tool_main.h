// The frame of each developer tool's main(): its arguments parsed (--help prints and exits 0, a
// bad argument prints its message and exits 2), then its body run, any exception printed as one
// "TOOL: error: WHAT" line with exit code 2.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

namespace veloxquant::dev {

// Returns body()'s exit code, or the code of the failure above.
template <class Body>
int run_tool(CLI::App& app, int argc, char** argv, const char* tool, Body&& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return 2;
  }
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
    return 2;
  }
}

}  // namespace veloxquant::dev
