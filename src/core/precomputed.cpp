#include "core/precomputed.h"

#include <cstdio>
#include <cstring>
#include <mutex>

#include "veloxquant/error.h"

namespace veloxquant {
namespace {

struct Store {
  std::mutex mutex;
  Tables loaded;
  Tables recorded;
  bool recording = false;
  TableCounts counts;
};

Store& store() {
  static Store s;
  return s;
}

}  // namespace

std::string describe_table(const TableKey& k) {
  // No fmt here: the CUDA benchmark project builds this file without the CPU library's dependencies.
  char seed[19];
  std::snprintf(seed, sizeof seed, "0x%016llx", static_cast<unsigned long long>(k.seed));
  switch (k.kind) {
    case TableKind::Rotation: return "rotation dim " + std::to_string(k.dim) + " seed " + seed;
    case TableKind::GaussianMatrix:
      return "gaussian matrix " + std::to_string(k.size) + " x " + std::to_string(k.dim) + " seed " + seed;
    case TableKind::SphereCodebook:
      return "sphere codebook " + std::to_string(k.size) + " bits dim " + std::to_string(k.dim);
    case TableKind::GaussianCodebook: {
      double sigma;
      std::memcpy(&sigma, &k.seed, sizeof sigma);
      return "gaussian codebook " + std::to_string(k.size) + " bits sigma " + std::to_string(sigma);
    }
  }
  return "table of kind " + std::to_string(static_cast<uint32_t>(k.kind));
}

Table precomputed_table(const TableKey& key, const std::function<Table()>& make) {
  Store& s = store();
  {
    std::lock_guard lock(s.mutex);
    if (const auto it = s.loaded.find(key); it != s.loaded.end()) {
      ++s.counts.loaded;
      return it->second;
    }
  }
  Table table = make();
  std::lock_guard lock(s.mutex);
  ++s.counts.computed;
  if (s.recording) s.recorded.emplace(key, table);
  return table;
}

void add_loaded_tables(const Tables& tables) {
  Store& s = store();
  std::lock_guard lock(s.mutex);
  s.loaded.insert(tables.begin(), tables.end());
}

void forget_loaded_tables() {
  Store& s = store();
  std::lock_guard lock(s.mutex);
  s.loaded.clear();
}

TableCounts table_counts() {
  Store& s = store();
  std::lock_guard lock(s.mutex);
  return s.counts;
}

void start_recording() {
  Store& s = store();
  std::lock_guard lock(s.mutex);
  if (s.recording) throw Error("precomputed tables: a recording is already running");
  s.recording = true;
  s.recorded.clear();
}

Tables stop_recording() {
  Store& s = store();
  std::lock_guard lock(s.mutex);
  s.recording = false;
  return std::move(s.recorded);
}

Table table_of(const std::vector<float>& values) {
  Table t(values.size() * sizeof(float));
  if (!t.empty()) std::memcpy(t.data(), values.data(), t.size());
  return t;
}

std::vector<float> floats_of(const Table& table) {
  std::vector<float> v(table.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), table.data(), v.size() * sizeof(float));
  return v;
}

}  // namespace veloxquant
