// Registry entries of the token-eviction policies (src/cache/registry.cpp lists them).
#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo snapkv_method();
MethodInfo pyramidkv_method();
MethodInfo adakv_method();
MethodInfo streaming_llm_method();
MethodInfo h2o_method();
MethodInfo squeeze_method();
MethodInfo tova_method();
MethodInfo expected_attention_method();
MethodInfo kvzip_method();
}  // namespace veloxquant
