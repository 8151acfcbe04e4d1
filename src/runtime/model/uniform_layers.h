// What needs one KV-head shape for every layer (calibration artifacts, session files, the CUDA
// runtime) refuses a model whose layers differ (gemma4) with one message.
#pragma once

#include <string_view>

#include "veloxquant/model.h"

namespace veloxquant::runtime {

// Throws Error unless every layer of c has the same shape and its own cache: "<what>: <arch>
// model '<name>' has layers of different shapes or shared-KV layers, and <needs>; expected ...".
void require_uniform_layers(const ModelConfig& c, std::string_view what, std::string_view needs);

}  // namespace veloxquant::runtime
