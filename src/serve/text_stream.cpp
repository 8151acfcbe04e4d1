#include "serve/text_stream.h"

#include <algorithm>

#include "veloxquant/tokenizer.h"

namespace veloxquant::serve {

TextStream::TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::add(const std::string& piece) {
  if (stopped_) return {};
  pending_ += piece;
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    text_ += out;
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stop_)
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  const size_t ready = complete_utf8(std::string_view(pending_).substr(0, pending_.size() - hold));
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  text_ += out;
  return out;
}

std::string TextStream::finish() {
  std::string out = stopped_ ? std::string() : pending_;
  pending_.clear();
  text_ += out;
  return out;
}

}  // namespace veloxquant::serve
