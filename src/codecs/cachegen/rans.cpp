#include "codecs/cachegen/rans.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "veloxquant/error.h"

namespace veloxquant::cachegen {
namespace {

[[noreturn]] void corrupt(const std::string& field, const std::string& what) {
  throw Error("rans: corrupt " + field + ": " + what);
}

void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

uint64_t get_varint(const uint8_t*& p, const uint8_t* end, unsigned max_bytes, const char* field) {
  uint64_t v = 0;
  for (unsigned i = 0; i < max_bytes; ++i) {
    if (p >= end) corrupt(field, "truncated varint");
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) return v;
  }
  corrupt(field, "varint longer than " + std::to_string(max_bytes) + " bytes");
}

}  // namespace

FreqTable FreqTable::from_counts(const uint32_t* counts, size_t alphabet) {
  FreqTable t;
  t.freq_.assign(alphabet, 0);
  uint64_t total = 0;
  for (size_t s = 0; s < alphabet; ++s) total += counts[s];
  if (total == 0 || alphabet == 0 || alphabet > 256) throw Error("rans: frequency table of no symbols");
  int64_t sum = 0;
  size_t top = 0;
  for (size_t s = 0; s < alphabet; ++s) {
    if (counts[s] == 0) continue;
    const uint64_t f = static_cast<uint64_t>(counts[s]) * kProbScale / total;
    t.freq_[s] = static_cast<uint32_t>(std::max<uint64_t>(f, 1));
    sum += t.freq_[s];
    if (counts[s] > counts[top]) top = s;
  }
  // Rounding down leaves a deficit (given to the most frequent symbol, where it costs least);
  // lifting rare symbols to 1 may leave an excess, taken from the largest frequencies.
  if (sum < static_cast<int64_t>(kProbScale)) t.freq_[top] += static_cast<uint32_t>(kProbScale - sum);
  while (sum > static_cast<int64_t>(kProbScale)) {
    const size_t big = static_cast<size_t>(std::max_element(t.freq_.begin(), t.freq_.end()) - t.freq_.begin());
    const int64_t take = std::min<int64_t>(sum - kProbScale, t.freq_[big] - 1);
    t.freq_[big] -= static_cast<uint32_t>(take);
    sum -= take;
  }
  t.finish();
  return t;
}

FreqTable FreqTable::read(const uint8_t*& p, const uint8_t* end, size_t alphabet) {
  FreqTable t;
  t.freq_.assign(alphabet, 0);
  uint64_t sum = 0;
  for (size_t s = 0; s < alphabet; ++s) {
    const uint64_t f = get_varint(p, end, 2, "frequency table");
    sum += f;
    if (sum > kProbScale) corrupt("frequency table", "frequencies exceed " + std::to_string(kProbScale));
    t.freq_[s] = static_cast<uint32_t>(f);
  }
  if (sum != kProbScale) {
    corrupt("frequency table", "frequencies sum to " + std::to_string(sum) + ", expected " +
                                   std::to_string(kProbScale));
  }
  t.finish();
  return t;
}

void FreqTable::write(std::vector<uint8_t>& out) const {
  for (uint32_t f : freq_) put_varint(out, f);
}

void FreqTable::finish() {
  cum_.assign(freq_.size() + 1, 0);
  for (size_t s = 0; s < freq_.size(); ++s) cum_[s + 1] = cum_[s] + freq_[s];
  slot_symbol_.assign(kProbScale, 0);
  for (size_t s = 0; s < freq_.size(); ++s)
    std::fill(slot_symbol_.begin() + cum_[s], slot_symbol_.begin() + cum_[s + 1], static_cast<uint8_t>(s));
}

double FreqTable::cost_bits(const uint32_t* counts) const {
  double bits = 0;
  for (size_t s = 0; s < freq_.size(); ++s)
    if (counts[s] > 0) bits += counts[s] * (kProbBits - std::log2(static_cast<double>(freq_[s])));
  return bits;
}

void rans_encode(const uint8_t* symbols, size_t n, const FreqTable& t, std::vector<uint8_t>& out) {
  std::vector<uint8_t> rev;  // renormalisation bytes, last symbol's first
  rev.reserve(n / 2 + 16);
  uint32_t x = kRansLow;
  for (size_t i = n; i-- > 0;) {
    const uint32_t f = t.freq(symbols[i]), c = t.cum(symbols[i]);
    const uint32_t x_max = ((kRansLow >> kProbBits) << 8) * f;
    while (x >= x_max) {
      rev.push_back(static_cast<uint8_t>(x & 0xFF));
      x >>= 8;
    }
    x = ((x / f) << kProbBits) + (x % f) + c;
  }
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<uint8_t>(x >> (8 * k)));
  out.insert(out.end(), rev.rbegin(), rev.rend());
}

void rans_decode(const uint8_t* in, size_t len, const FreqTable& t, uint8_t* symbols, size_t n) {
  if (len < 4) corrupt("rANS stream", std::to_string(len) + " bytes, shorter than its 4-byte state");
  uint32_t x = 0;
  for (int k = 0; k < 4; ++k) x |= static_cast<uint32_t>(in[k]) << (8 * k);
  if (x < kRansLow || x >= (kRansLow << 8)) corrupt("rANS stream", "initial state out of range");
  const uint8_t* p = in + 4;
  const uint8_t* const end = in + len;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t slot = x & (kProbScale - 1);
    const uint8_t s = t.symbol_at(slot);
    x = t.freq(s) * (x >> kProbBits) + slot - t.cum(s);
    while (x < kRansLow) {
      if (p == end) corrupt("rANS stream", "truncated at symbol " + std::to_string(i) + " of " + std::to_string(n));
      x = (x << 8) | *p++;
    }
    symbols[i] = s;
  }
  if (p != end) corrupt("rANS stream", std::to_string(end - p) + " bytes left over after the last symbol");
  if (x != kRansLow) corrupt("rANS stream", "final state is not the encoder's initial state");
}

std::vector<uint8_t> rans_compress(std::span<const uint8_t> symbols, size_t alphabet) {
  if (alphabet == 0 || alphabet > 256) throw Error("rans: alphabet of " + std::to_string(alphabet) + " symbols; expected 1..256");
  std::vector<uint8_t> out;
  put_varint(out, symbols.size());
  out.push_back(static_cast<uint8_t>(alphabet - 1));
  if (symbols.empty()) return out;
  std::vector<uint32_t> counts(alphabet, 0);
  for (uint8_t s : symbols) {
    if (s >= alphabet) throw Error("rans: symbol " + std::to_string(s) + " outside an alphabet of " + std::to_string(alphabet));
    ++counts[s];
  }
  const FreqTable t = FreqTable::from_counts(counts.data(), alphabet);
  t.write(out);
  rans_encode(symbols.data(), symbols.size(), t, out);
  return out;
}

std::vector<uint8_t> rans_decompress(std::span<const uint8_t> stream, size_t max_symbols) {
  const uint8_t* p = stream.data();
  const uint8_t* const end = p + stream.size();
  const uint64_t n = get_varint(p, end, 10, "header");
  if (n > max_symbols) corrupt("header", "declares " + std::to_string(n) + " symbols, more than " + std::to_string(max_symbols));
  if (p == end) corrupt("header", "truncated before the alphabet size");
  const size_t alphabet = size_t{*p++} + 1;
  std::vector<uint8_t> symbols(static_cast<size_t>(n));
  if (n == 0) {
    if (p != end) corrupt("header", "bytes after an empty stream");
    return symbols;
  }
  const FreqTable t = FreqTable::read(p, end, alphabet);
  rans_decode(p, static_cast<size_t>(end - p), t, symbols.data(), symbols.size());
  return symbols;
}

}  // namespace veloxquant::cachegen
