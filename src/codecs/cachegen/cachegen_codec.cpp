#include "codecs/cachegen/cachegen_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "codecs/cachegen/rans.h"
#include "codecs/common/affine_grid.h"
#include "core/bitpack.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::cachegen {
namespace {

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

CachegenCodec::CachegenCodec(Stream stream, size_t dim, unsigned bits, size_t block, size_t group)
    : stream_(stream), dim_(dim), block_(block), group_(std::min(group, dim)), bits_(bits) {
  groups_ = (dim_ + group_ - 1) / group_;
  params_ = stream_ == Stream::Keys ? dim_ : block_ * groups_;
  capacity_ = packed_bytes(block_ * dim_, bits_);
  anchor_bytes_ = packed_bytes(dim_, bits_);
  max_block_bytes_ = 4 * params_ + kHeaderBytes + capacity_;
}

QuantizedBlock CachegenCodec::quantize(const float* x) const {
  QuantizedBlock q;
  q.codes.resize(block_ * dim_);
  q.step.resize(params_);
  q.min.resize(params_);
  if (stream_ == Stream::Keys) {
    for (size_t c = 0; c < dim_; ++c) {
      float lo = x[c], hi = x[c];
      for (size_t t = 1; t < block_; ++t) lo = std::min(lo, x[t * dim_ + c]), hi = std::max(hi, x[t * dim_ + c]);
      const AffineGrid g = AffineGrid::fit(lo, hi, bits_);
      q.step[c] = g.scale_f16;
      q.min[c] = g.min_f16;
      for (size_t t = 0; t < block_; ++t) q.codes[t * dim_ + c] = g.quantize(x[t * dim_ + c]);
    }
  } else {
    for (size_t t = 0; t < block_; ++t)
      for (size_t gi = 0; gi < groups_; ++gi) {
        const size_t c0 = gi * group_, c1 = std::min(dim_, c0 + group_);
        const float* row = x + t * dim_;
        const auto [lo, hi] = std::minmax_element(row + c0, row + c1);
        const AffineGrid g = AffineGrid::fit(*lo, *hi, bits_);
        q.step[t * groups_ + gi] = g.scale_f16;
        q.min[t * groups_ + gi] = g.min_f16;
        for (size_t c = c0; c < c1; ++c) q.codes[t * dim_ + c] = g.quantize(row[c]);
      }
  }
  return q;
}

void CachegenCodec::dequantize(const QuantizedBlock& q, float* x) const {
  for (size_t t = 0; t < block_; ++t)
    for (size_t c = 0; c < dim_; ++c) {
      const size_t p = stream_ == Stream::Keys ? c : t * groups_ + c / group_;
      x[t * dim_ + c] = f16_to_f32(q.min[p]) + f16_to_f32(q.step[p]) * static_cast<float>(q.codes[t * dim_ + c]);
    }
}

size_t CachegenCodec::encode_block(const float* x, uint8_t* out) const {
  const QuantizedBlock q = quantize(x);
  std::memcpy(out, q.step.data(), 2 * params_);
  std::memcpy(out + 2 * params_, q.min.data(), 2 * params_);
  uint8_t* header = out + 4 * params_;
  uint8_t* payload = header + kHeaderBytes;

  // Token-wise deltas of the codes, modulo 2^bits: lossless, and concentrated near 0 (and near
  // 2^bits, the small negative deltas) where neighbouring tokens are alike.
  const size_t alphabet = size_t{1} << bits_;
  const uint8_t mask = static_cast<uint8_t>(alphabet - 1);
  std::vector<uint8_t> deltas((block_ - 1) * dim_);
  std::vector<uint32_t> counts(alphabet, 0);
  for (size_t i = 0; i < deltas.size(); ++i) {
    deltas[i] = static_cast<uint8_t>((q.codes[dim_ + i] - q.codes[i]) & mask);
    ++counts[deltas[i]];
  }
  std::vector<uint8_t> coded(anchor_bytes_);
  pack_bits(q.codes.data(), dim_, bits_, coded.data());
  const FreqTable table = FreqTable::from_counts(counts.data(), alphabet);
  table.write(coded);
  // Skip coding when the model alone already says it cannot beat the raw codes.
  const double estimate = table.cost_bits(counts.data()) / 8 + static_cast<double>(coded.size());
  if (estimate < static_cast<double>(capacity_)) rans_encode(deltas.data(), deltas.size(), table, coded);

  uint32_t length = 0;
  if (estimate < static_cast<double>(capacity_) && coded.size() < capacity_) {
    header[0] = 1;
    std::memcpy(payload, coded.data(), coded.size());
    length = static_cast<uint32_t>(coded.size());
  } else {
    header[0] = 0;
    pack_bits(q.codes.data(), block_ * dim_, bits_, payload);
    length = static_cast<uint32_t>(capacity_);
  }
  header[1] = header[2] = header[3] = 0;
  for (int k = 0; k < 4; ++k) header[4 + k] = static_cast<uint8_t>(length >> (8 * k));
  return 4 * params_ + kHeaderBytes + length;
}

std::string CachegenCodec::corrupt_prefix() const { return std::string("cachegen: corrupt ") + name() + " codes: "; }

CachegenCodec::BlockHeader CachegenCodec::read_header(const uint8_t* block, size_t available) const {
  const size_t fixed = 4 * params_ + kHeaderBytes;
  if (available < fixed) {
    throw Error("field header: the block's grids and header need " + std::to_string(fixed) + " bytes; " +
                std::to_string(available) + " are left (truncated)");
  }
  const uint8_t* header = block + 4 * params_;
  const BlockHeader h{header[0], load_u32(header + 4), fixed + load_u32(header + 4)};
  if (h.mode > 1) throw Error("field mode = " + std::to_string(h.mode) + "; expected 0 (raw) or 1 (rans)");
  if (header[1] != 0 || header[2] != 0 || header[3] != 0) throw Error("field header: reserved bytes are not zero");
  const std::string length = "field payload length = " + std::to_string(h.length) + "; ";
  if (h.mode == 0 && h.length != capacity_) {
    throw Error(length + "a raw block holds exactly " + std::to_string(capacity_));
  }
  if (h.mode == 1 && (h.length >= capacity_ || h.length < anchor_bytes_)) {
    throw Error(length + "a rans block holds " + std::to_string(anchor_bytes_) + " (the anchor codes) to " +
                std::to_string(capacity_ - 1));
  }
  if (h.bytes > available) {
    throw Error(length + "the block needs " + std::to_string(h.bytes) + " bytes; " + std::to_string(available) +
                " are left (truncated)");
  }
  return h;
}

size_t CachegenCodec::encoded_block_bytes(const uint8_t* block, size_t available) const {
  try {
    return read_header(block, available).bytes;
  } catch (const Error& e) {
    throw Error(corrupt_prefix() + e.what());
  }
}

QuantizedBlock CachegenCodec::read_block(const uint8_t*& p, size_t index, bool check) const {
  const std::string where = corrupt_prefix() + "block " + std::to_string(index) + ", ";
  QuantizedBlock q;
  q.step.resize(params_);
  q.min.resize(params_);
  std::memcpy(q.step.data(), p, 2 * params_);
  std::memcpy(q.min.data(), p + 2 * params_, 2 * params_);
  if (check) {
    for (size_t i = 0; i < params_; ++i) {
      const uint16_t s = q.step[i], m = q.min[i];
      // A group of negative zeros stores the step -0 (0x8000), which is as good as 0.
      if ((s & 0x7C00) == 0x7C00 || ((s & 0x8000) != 0 && s != 0x8000)) {
        throw Error(where + "field step[" + std::to_string(i) + "] = " + std::to_string(f16_to_f32(s)) +
                    "; expected a finite step >= 0");
      }
      if ((m & 0x7C00) == 0x7C00) {
        throw Error(where + "field min[" + std::to_string(i) + "] = " + std::to_string(f16_to_f32(m)) +
                    "; expected a finite minimum");
      }
    }
  }
  const BlockHeader h = [&] {
    try {
      return read_header(p, std::numeric_limits<size_t>::max());
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
  }();
  const uint8_t* payload = p + 4 * params_ + kHeaderBytes;
  p += h.bytes;
  q.codes.resize(block_ * dim_);
  if (h.mode == 0) {
    unpack_bits(payload, block_ * dim_, bits_, q.codes.data());
    return q;
  }
  unpack_bits(payload, dim_, bits_, q.codes.data());
  const uint8_t* at = payload + anchor_bytes_;
  const uint8_t* const end = payload + h.length;
  const size_t alphabet = size_t{1} << bits_;
  try {
    const FreqTable table = FreqTable::read(at, end, alphabet);
    rans_decode(at, static_cast<size_t>(end - at), table, q.codes.data() + dim_, (block_ - 1) * dim_);
  } catch (const Error& e) {
    throw Error(where + "field " + e.what());
  }
  const uint8_t mask = static_cast<uint8_t>(alphabet - 1);
  for (size_t i = dim_; i < block_ * dim_; ++i) q.codes[i] = static_cast<uint8_t>((q.codes[i] + q.codes[i - dim_]) & mask);
  return q;
}

void CachegenCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  for (size_t b = 0; b < n / block_; ++b) codes += encode_block(x + b * block_ * dim_, codes);
}

void CachegenCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  for (size_t b = 0; b < n / block_; ++b) dequantize(read_block(codes, b, false), x + b * block_ * dim_);
}

void CachegenCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t b = 0; b < n / block_; ++b) read_block(codes, b, true);
}

size_t CachegenCodec::rans_blocks(const uint8_t* codes, size_t n) const {
  size_t count = 0;
  for (size_t b = 0; b < n / block_; ++b) {
    count += codes[4 * params_] == 1;
    codes += encoded_block_bytes(codes, std::numeric_limits<size_t>::max());
  }
  return count;
}

}  // namespace veloxquant::cachegen
