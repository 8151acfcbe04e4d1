#include <fmt/format.h>

#include <algorithm>

#include "veloxquant/method.h"

namespace veloxquant {

std::string describe_params(const MethodInfo& method) {
  size_t width = 0;
  for (const auto& p : method.params) width = std::max(width, p.name.size());
  std::string text;
  for (const auto& p : method.params) {
    text += fmt::format("    {:<{}}  {:<24} {}\n", p.name, width, p.describe(), p.help);
  }
  return text;
}

}  // namespace veloxquant
