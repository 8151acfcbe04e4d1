// What ratequant measures at calibration: how much storing one KV head with a quantizer at a given
// bit width disturbs that head's attention output.
#pragma once

#include <cstddef>
#include <vector>

#include "veloxquant/method.h"

namespace veloxquant::ratequant {

// One KV head's calibration sequences: `sequences` runs of `length` tokens, rows of `dim` floats
// `stride` floats apart (one head of a [tokens, kv_heads, dim] array).
struct HeadSamples {
  const float* keys;
  const float* values;
  size_t sequences, length, dim, stride;
};

// For each of `codecs` (the quantizer at each bit width measured): the mean over every query
// position of the squared L2 error of causal softmax attention output when the head's keys and
// values are stored by it (every whole block of each sequence encoded
// and decoded; the tokens after the last whole block exact, as a residual window keeps them). The
// calibration pass records no queries: each key stands in for the query at its position (scores
// k_i . k_j / sqrt(dim), j <= i).
std::vector<double> attention_distortion(const std::vector<LayerCodecs>& codecs, const HeadSamples& samples);

}  // namespace veloxquant::ratequant
