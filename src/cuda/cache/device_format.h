// A device format: what one method family's GPU cache is. DeviceCache (device_cache.cu) holds
// the streams, the rings and the plans; it asks its format everything that differs between
// families: the code sizes, the tables in device memory, the append and attention kernels. A
// family adds its GPU path by defining a format in src/cuda/<family>/ and registering it under
// the name its CPU form (MethodInfo::cuda_config) puts in CacheConfig::format.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "cuda/attention/launchers.h"
#include "cuda/cache/layout.cuh"
#include "veloxquant/cuda.h"

namespace veloxquant::cuda {

class DeviceFormat {
 public:
  virtual ~DeviceFormat() = default;
  // Windowed formats (KIVI, QJL) keep the newest tokens as fp16 rows in rings and encode keys in
  // blocks of key_block() tokens, values in blocks of value_block(); the others encode every
  // token on append and keep no ring.
  virtual bool windowed() const { return false; }
  virtual int key_block() const { return 1; }
  virtual int value_block() const { return 1; }
  // Code bytes of n tokens of one stream (n a multiple of the block).
  virtual size_t key_code_bytes(size_t n) const = 0;
  virtual size_t value_code_bytes(size_t n) const = 0;
  // State stored once per sequence, counted as KVCache counts it (codebooks, signs, sketches).
  virtual size_t shared_bytes(bool /*key*/) const { return 0; }
  // State each stream fits to its own tokens (the CPU codec's CacheStream::state), kept in
  // StreamView::state from the first append on; 0: none.
  virtual size_t stream_state_bytes(bool /*key*/) const { return 0; }
  // Encodes p.n tokens per stream (keys rotated first when p.rope_half > 0): one launch.
  virtual void append(const AppendParams& p, int batch, cudaStream_t stream) const = 0;
  // The attention kernel for p's shape, with the format's arguments put into p.format.
  virtual SplitKernel split_kernel(AttendParams& p) const = 0;
  // A value rotation that the combine undoes: the signs of a Hadamard rotation (times
  // 1/sqrt(head_dim)), or a dense matrix (row-major R, undone by R^T); null: none.
  virtual const float* value_signs() const { return nullptr; }
  virtual const float* value_matrix() const { return nullptr; }
};

// Makes a format for c (whose shape config_problem() has passed): checks the format's own rules,
// throwing veloxquant::Error naming what its kernels do not run, and uploads its tables.
using DeviceFormatFactory = std::unique_ptr<DeviceFormat> (*)(const CacheConfig& c);

// Adds a format under `name` (VQ_DEVICE_FORMAT does, at static initialization); returns true.
bool register_device_format(const char* name, DeviceFormatFactory make);
// The format c.format names; throws Error listing the registered ones when none has the name.
std::unique_ptr<DeviceFormat> make_device_format(const CacheConfig& c);

// Registers factory under name from the family's own file. The CUDA library is linked whole
// (src/cuda/CMakeLists.txt), so every family's registration is kept.
#define VQ_DEVICE_FORMAT(id, name, factory) \
  [[maybe_unused]] static const bool vq_device_format_##id = ::veloxquant::cuda::register_device_format(name, factory)

}  // namespace veloxquant::cuda
