// Runs the built `veloxquant` CLI (path injected at compile time) for the CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace veloxquant::test {

struct CliRun {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs the CLI with `args` (already shell-quoted where needed), capturing stdout and stderr.
inline CliRun run_cli(const std::string& args) {
  static int counter = 0;
  const std::string base = ::testing::TempDir() + "veloxquant_cli_test_" +
                           std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::string out_path = base + ".out", err_path = base + ".err";
  const std::string cmd = std::string("'") + VELOXQUANT_CLI_PATH + "' " + args + " >'" + out_path +
                          "' 2>'" + err_path + "'";
  const int status = std::system(cmd.c_str());
  CliRun r;
  if (status != -1 && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

inline size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  if (!s.empty() && s.back() != '\n') ++n;
  return n;
}

inline void expect_one_line_error(const std::string& args, const std::string& names) {
  const CliRun r = run_cli(args);
  EXPECT_EQ(r.code, 2) << args << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << args << "\nstderr:\n" << r.err;
  EXPECT_NE(r.err.find(names), std::string::npos) << args << "\nstderr:\n" << r.err;
}

}  // namespace veloxquant::test
