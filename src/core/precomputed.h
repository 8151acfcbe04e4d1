// Tables the codecs derive from a seed and a shape when a cache is built: rotations, Gaussian
// sketches, Lloyd-Max codebooks. Each is a pure function of its key. Tables loaded from a
// precompute artifact (veloxquant/precomputed.h) are handed out instead of computing them again;
// while recording, every table computed is kept, for `veloxquant precompute` to write.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace veloxquant {

enum class TableKind : uint32_t {
  Rotation = 1,          // Rotation(dim, seed): random signs, or a dense orthogonal matrix
  GaussianMatrix = 2,    // gaussian_matrix(rows = size, cols = dim, seed)
  SphereCodebook = 3,    // lloyd_max_sphere_coordinate(bits = size, dim)
  GaussianCodebook = 4,  // lloyd_max_gaussian(bits = size, sigma = the seed's bits as a double)
};

struct TableKey {
  TableKind kind = TableKind::Rotation;
  uint64_t dim = 0, size = 0, seed = 0;
  auto operator<=>(const TableKey&) const = default;
};

// "rotation dim 96 seed 0x..." for messages and reports.
std::string describe_table(const TableKey& key);

using Table = std::vector<uint8_t>;
using Tables = std::map<TableKey, Table>;

// The table of `key`: a loaded one, else make(), which is kept too while recording.
Table precomputed_table(const TableKey& key, const std::function<Table()>& make);

// Hands out these tables from now on (a loaded artifact; a key already loaded keeps its table).
void add_loaded_tables(const Tables& tables);
// Forgets every loaded table (tests).
void forget_loaded_tables();

// Tables computed and tables handed out from the loaded ones since the process started.
struct TableCounts {
  size_t computed = 0, loaded = 0;
};
TableCounts table_counts();

// Keeps every table computed from now until stop_recording(), which returns them. One
// recording at a time.
void start_recording();
Tables stop_recording();

// Rows of n f32 values as a table and back (REQUIRES: table.size() is a multiple of 4).
Table table_of(const std::vector<float>& values);
std::vector<float> floats_of(const Table& table);

}  // namespace veloxquant
