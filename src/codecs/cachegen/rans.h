// A byte-exact rANS entropy coder (Duda 2013; the byte-wise 32-bit variant of ryg_rans) with a
// static frequency model: CacheGen's lossless stage (cachegen_codec.h).
//
// Model: symbol s of an alphabet of A <= 256 symbols has frequency f_s > 0 (if it occurs) out of
// kProbScale = 2^12; the frequencies are normalised from the counts of the data being coded and
// stored beside the stream as A LEB128 varints (one or two bytes each).
//
// Stream of n symbols: the final encoder state as 4 little-endian bytes, then the renormalisation
// bytes in the order the decoder reads them. The decoder checks everything a corrupt stream can
// break: the state range, every byte read against the end, that it consumes exactly the stream,
// and that it ends in the encoder's initial state. It never reads out of bounds; it throws Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace veloxquant::cachegen {

inline constexpr unsigned kProbBits = 12;
inline constexpr uint32_t kProbScale = 1u << kProbBits;
inline constexpr uint32_t kRansLow = 1u << 23;  // state interval [kRansLow, kRansLow << 8)

class FreqTable {
 public:
  // Normalised frequencies of `counts` (alphabet entries, at least one non-zero): every symbol
  // that occurs gets a frequency >= 1, the frequencies sum to kProbScale.
  static FreqTable from_counts(const uint32_t* counts, size_t alphabet);
  // Reads a table that write() wrote, advancing p; throws Error naming the frequency table when
  // it runs past `end`, a varint is longer than two bytes or the frequencies do not sum to
  // kProbScale.
  static FreqTable read(const uint8_t*& p, const uint8_t* end, size_t alphabet);
  void write(std::vector<uint8_t>& out) const;
  size_t alphabet() const { return freq_.size(); }
  uint32_t freq(size_t s) const { return freq_[s]; }
  uint32_t cum(size_t s) const { return cum_[s]; }
  uint8_t symbol_at(uint32_t slot) const { return slot_symbol_[slot]; }
  // Bits the table's model spends on `counts`: sum_s counts_s * log2(kProbScale / f_s).
  double cost_bits(const uint32_t* counts) const;

 private:
  void finish();  // cumulative frequencies and the slot -> symbol table
  std::vector<uint32_t> freq_, cum_;
  std::vector<uint8_t> slot_symbol_;
};

// Appends the rANS stream of symbols[0, n) to out. REQUIRES: t.freq(s) > 0 for every symbol.
void rans_encode(const uint8_t* symbols, size_t n, const FreqTable& t, std::vector<uint8_t>& out);
// Decodes n symbols from exactly `len` bytes; throws Error (naming the rANS stream) on corrupt
// input, never reading outside [in, in + len).
void rans_decode(const uint8_t* in, size_t len, const FreqTable& t, uint8_t* symbols, size_t n);

// Self-contained streams: [varint n][u8 alphabet - 1][table][rANS stream] (only the first two when
// n == 0). The table is fitted to the symbols themselves.
std::vector<uint8_t> rans_compress(std::span<const uint8_t> symbols, size_t alphabet = 256);
// Throws Error on a truncated or corrupt stream, or one that declares more than max_symbols.
std::vector<uint8_t> rans_decompress(std::span<const uint8_t> stream,
                                     size_t max_symbols = size_t{1} << 28);

}  // namespace veloxquant::cachegen
