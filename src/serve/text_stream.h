// A generation's text as it may be sent: whole UTF-8 characters only, and nothing that could be
// the start of a stop string until the next tokens show it is not one.
#pragma once

#include <string>
#include <vector>

namespace veloxquant::serve {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop);
  // Adds a token's piece; returns the text that is now safe to send. Once a stop string appears,
  // the text before it is returned and stopped() is true; later pieces are ignored.
  std::string add(const std::string& piece);
  // The held-back rest at the end of the generation (a partial stop string is text after all).
  std::string finish();
  bool stopped() const { return stopped_; }
  // Everything sent so far.
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stop_;
  std::string pending_, text_;
  bool stopped_ = false;
};

}  // namespace veloxquant::serve
