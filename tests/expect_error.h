// Checking error messages: what a call throws, and that a message names what it should.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace veloxquant::test {

// The message of the E that fn() throws; "" when it throws nothing.
template <class E, class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace veloxquant::test

#define EXPECT_CONTAINS(text, fragment)                                                                      \
  do {                                                                                                       \
    const std::string& expect_contains_text = (text);                                                        \
    EXPECT_NE(expect_contains_text.find(fragment), std::string::npos)                                        \
        << "expected a message containing \"" << (fragment) << "\", got \"" << expect_contains_text << "\""; \
  } while (0)
