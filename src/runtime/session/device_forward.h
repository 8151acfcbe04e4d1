// The forward pass on the GPU behind a Session whose options say Device::Cuda: the model's
// weights and one compressed cache per layer in GPU memory (cuda::DeviceDecoder). Only builds
// with the CUDA backend (-DVELOXQUANT_CUDA=ON) can create one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/model.h"
#include "veloxquant/spec.h"

namespace veloxquant::runtime {

class DeviceForward {
 public:
  virtual ~DeviceForward() = default;
  // Session::Impl::step's contract for each of the session's sequences: n tokens at the next
  // positions (tokens [batch, n]), logits of tokens [first_logit, n) into `logits` ([batch,
  // n - first_logit, vocab]; null: they stay on the device for sample()).
  virtual void step(const int32_t* tokens, size_t n, size_t first_logit, float* logits) = 0;
  // Each sequence's next token from its last token's logits of the last step, picked on the device.
  virtual std::vector<int32_t> sample(std::span<const SampleRequest> requests) = 0;
  // The most tokens any layer's cache holds now (less than the tokens stepped once an evicting
  // cache has dropped some).
  virtual size_t held_tokens() const = 0;
  virtual size_t key_bytes() const = 0;
  virtual size_t value_bytes() const = 0;
  // Bytes of the weights on the device: every matrix decoded once at load to f16 (or f32).
  virtual size_t weight_bytes() const = 0;
  virtual void reset() = 0;
  // The one sequence's streams of cache layer l in the CPU cache's layout (Session::caches() of a
  // GPU session, what a session file saves).
  virtual void download(size_t layer, std::vector<CacheStream>& keys,
                        std::vector<CacheStream>& values) const = 0;
  // Every layer's cache replaced by the streams of caches[l] (one sequence's, `tokens` tokens each:
  // a restored session file); the next step continues at position `tokens`.
  virtual void restore(size_t tokens, std::span<const KVCache> caches) = 0;
};

// Throws Error when the build has no CUDA backend, and SpecError naming the methods that have
// CUDA kernels when `spec` is not one of them.
// batch: sequences decoded in lockstep, each with its own caches. ropes: each layer's RoPE, as
// the session rotates on the CPU (a windowed layer's own base, phi3's long factors past the
// original context). calibration: a calibrated spec's artifact (null for the others).
std::unique_ptr<DeviceForward> make_device_forward(const Model& model, const Spec& spec,
                                                   std::span<const RopeParams> ropes, size_t context,
                                                   size_t max_step, size_t batch, GpuWeights weights,
                                                   std::shared_ptr<const CalibrationArtifact> calibration);

}  // namespace veloxquant::runtime
