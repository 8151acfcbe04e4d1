// `veloxquant methods`: the catalogue of registered methods with parameters and measured bits.
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "commands.h"
#include "eval/synthetic_kv.h"
#include "veloxquant/codec.h"
#include "veloxquant/cuda.h"
#include "veloxquant/method.h"

namespace veloxquant::cli {
namespace {

constexpr size_t kTokens = 4096, kDim = 128;

// A calibrated method is fitted to a synthetic draw (its layout, and so its bits, do not depend
// on the tables).
LayerCodecs default_codecs(const MethodInfo& m) {
  const Spec spec = parse_spec(m.name);
  return m.make(spec.params, with_synthetic_calibration(spec, LayerShape{1, kDim, 0, 0}));
}

// The bytes of the codes of the first n tokens of `x` ([tokens, kDim]): code_bytes(n) for a
// fixed-length codec; a variable-length one's size depends on the data, so x is encoded.
size_t code_bytes_of(const Codec& codec, const std::vector<float>& x, size_t n) {
  if (!codec.variable_length()) return codec.code_bytes(n);
  const std::shared_ptr<const Codec> ready = codec_for_stream(codec, x.data(), n);
  std::vector<uint8_t> codes(ready->code_bytes(n));
  ready->encode(x.data(), n, codes.data());
  return ready->encoded_bytes(codes.data(), n, codes.size());
}

// Bits per element of K+V at default parameters on a long stream (head_dim 128, 4096 tokens of
// the synthetic workload, eval/synthetic_kv.h) with the residual window counted as fp16, and the
// state a codec fitted per stream keeps.
double measured_bits(const LayerCodecs& c, const SyntheticKV& w) {
  const size_t tokens = kTokens, d = kDim;
  auto stream_bytes = [&](const Codec& codec, const std::vector<float>& x) {
    const size_t stored = std::min(tokens, c.residual);
    size_t encoded = (tokens - stored) / codec.block_tokens() * codec.block_tokens();
    return code_bytes_of(codec, x, encoded) + (tokens - encoded) * d * 2 + codec.state_bytes() +
           codec.stream_state_bytes();
  };
  return 8.0 * static_cast<double>(stream_bytes(*c.key, w.keys) + stream_bytes(*c.value, w.values)) /
         static_cast<double>(2 * tokens * d);
}

// Cross-layer methods: the same measure over one pair of layers, both layers' bytes over both
// layers' elements.
double measured_pair_bits(const MethodInfo& m, size_t residual) {
  const size_t tokens = kTokens, d = kDim;
  const PairCodecs p = m.make_pair(parse_spec(m.name).params, LayerShape{1, kDim, 0, 0, 2});
  size_t bytes = 0;
  for (const PairCodec* codec : {p.key.get(), p.value.get()}) {
    const size_t stored = std::min(tokens, residual);
    const size_t encoded = (tokens - stored) / codec->block_tokens() * codec->block_tokens();
    bytes += codec->leader_bytes(encoded) + codec->follower_bytes(encoded) + 2 * (tokens - encoded) * d * 2;
  }
  return 8.0 * static_cast<double>(bytes) / static_cast<double>(2 * 2 * tokens * d);
}

}  // namespace

Command add_methods_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("methods", "List every compression method and eviction policy with its parameters");
  return [cmd] {
    (void)cmd;
    const SyntheticKV workload = make_synthetic_kv(kTokens, 1, kDim, 1, 1, 1);
    for (const auto& m : registered_methods()) {
      const LayerCodecs c = default_codecs(m);
      fmt::print("{}  [{}]  {:.2f} bits/element (K+V, head_dim 128, 4096 synthetic tokens, defaults)\n",
                 m.name, m.family, measured_bits(c, workload));
      fmt::print("    {}\n    paper: {}\n", m.summary, m.paper);
      // Whether attention reads the codes directly on this build, or decodes them first.
      auto mode = [](bool fused) { return fused ? "on the codes" : "after decoding"; };
      fmt::print("    cpu: attention scores {}, value sums {}\n", mode(c.key->fused_score()),
                 mode(c.value->fused_accumulate()));
      // The CUDA backend's own answer for the defaults (cuda::supports), whether or not this build has it.
      const cuda::Support gpu = cuda::supports(parse_spec(m.name), LayerShape{1, kDim, 0, 0});
      std::string dims;  // the head sizes the backend holds the defaults at
      for (size_t d : {64, 80, 96, 128, 256})
        if (cuda::supports(parse_spec(m.name), LayerShape{1, d, 0, 0}))
          dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      fmt::print("    cuda: {}\n",
                 gpu ? "append and decode attention " + m.cuda_attention + " (head_dim " + dims + ")"
                 : m.cuda_config ? "at other settings; at the defaults: " + gpu.reason
                                 : std::string("CPU only"));
      if (m.cross_layer()) {
        const PairCodecs p = m.make_pair(parse_spec(m.name).params, LayerShape{1, kDim, 0, 0, 2});
        fmt::print("    cross-layer: {:.2f} bits/element over a pair of layers (above: a layer outside "
                   "pairs); paired layers attend {} / {}\n", measured_pair_bits(m, c.residual),
                   mode(p.key->view_codec().fused_score()), mode(p.value->view_codec().fused_accumulate()));
      }
      fmt::print("{}\n", describe_params(m));
    }
    fmt::print("Eviction policies: which tokens a cache keeps, from the attention the real queries pay.\n"
               "Alone they keep tokens in fp16; 'policy:...+quantizer:...' stores them compressed.\n\n");
    for (const auto& m : registered_policies()) {
      const cuda::Support gpu = cuda::supports(parse_spec(m.name), LayerShape{1, kDim, 0, 0});
      fmt::print("{}  [{}]\n    {}\n    paper: {}\n    cuda: {}\n", m.name, m.family, m.summary, m.paper,
                 !m.cuda_config ? std::string("CPU only")
                 : gpu          ? "over a GPU quantizer: " + m.cuda_attention
                                : "at other settings; at the defaults: " + gpu.reason);
      fmt::print("{}\n", describe_params(m));
    }
  };
}

}  // namespace veloxquant::cli
