// What the tokenizer tests share: strings as failure messages show them, and as test names.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <string>

namespace veloxquant::test {

// A string for failure messages, with every byte outside printable ASCII escaped.
inline std::string shown(const std::string& s) {
  std::string out;
  for (const unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// A string parameter as a test name: GoogleTest allows only letters, digits and '_'.
inline std::string param_name(const testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

}  // namespace veloxquant::test
