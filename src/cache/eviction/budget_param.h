// The parameter every eviction policy shares.
#pragma once
#include "veloxquant/spec.h"
namespace veloxquant {
inline ParamDef budget_param(const char* help = "tokens each KV head keeps") {
  return ParamDef::integer("budget", 1024, 16, 1 << 24, help);
}
}  // namespace veloxquant
