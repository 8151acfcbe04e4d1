// The part of a device format that the families storing KIVI's values share (kivi, qjl, kitty):
// the newest tokens in fp16 rings, keys in blocks of `key_group` tokens of key_block_bytes each,
// values in KIVI's blocks of 4 tokens (kivi_layout.cuh).
#pragma once

#include "cuda/cache/device_format.h"
#include "cuda/kivi/kivi_layout.cuh"

namespace veloxquant::cuda {

class KiviValuesFormat : public DeviceFormat {
 public:
  KiviValuesFormat(int key_group, int key_block_bytes, kivi::ValueLayout values)
      : key_group_(key_group), key_block_bytes_(key_block_bytes), values_(values) {}
  bool windowed() const override { return true; }
  int key_block() const override { return key_group_; }
  int value_block() const override { return 4; }
  size_t key_code_bytes(size_t n) const override { return n / key_group_ * key_block_bytes_; }
  size_t value_code_bytes(size_t n) const override { return n / 4 * values_.block_bytes(); }

 protected:
  int key_group_, key_block_bytes_;
  kivi::ValueLayout values_;
};

}  // namespace veloxquant::cuda
