// `veloxquant precompute`: computes the seeded rotations, Gaussian sketches and Lloyd-Max
// codebooks that the caches of given specs, head dims and layers build, and writes them to
// DIR/tables.vqtab, which specs with artifacts=DIR then load instead of computing them.
#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "commands.h"
#include "run_stats.h"
#include "veloxquant/precomputed.h"
#include "veloxquant/spec.h"

namespace veloxquant::cli {
namespace {

struct PrecomputeArgs {
  PrecomputeRequest request;
  std::string out;
};

void run(const PrecomputeArgs& a) {
  const PrecomputeReport r = precompute_tables(a.request, a.out);
  fmt::print("precomputed {} tables ({} new) for {} x head_dim {} x {} layers in {:.1f} ms\n", r.tables,
             r.added, fmt::join(a.request.specs, ", "), fmt::join(a.request.head_dims, ","), a.request.layers,
             r.compute_seconds * 1e3);
  const auto start = std::chrono::steady_clock::now();
  load_precomputed(a.out);
  const double load = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Spec example = parse_spec(a.request.specs.front());
  example.params.strings["artifacts"] = a.out;
  fmt::print(
      "saved {} ({} B; loading it takes {:.1f} ms); use it with artifacts=DIR in the spec, e.g. --kv {}\n",
      precomputed_path(a.out), grouped(r.file_bytes), load * 1e3, example.to_string());
}

}  // namespace

Command add_precompute_command(CLI::App& app) {
  auto a = std::make_shared<PrecomputeArgs>();
  auto* cmd = app.add_subcommand(
      "precompute", "Write the seeded rotations, sketches and codebooks that the caches of the given specs "
                    "compute when built, for specs to load with artifacts=DIR");
  cmd->add_option("--kv", a->request.specs, "cache method spec(s), e.g. turboquant_prod:bits=3")->required();
  cmd->add_option("--head-dim", a->request.head_dims, "head dimension(s)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--layers", a->request.layers, "layers of the model (each has its own seeds)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--kv-heads", a->request.kv_heads, "KV heads (a calibrated spec's artifact fixes it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--seed", a->request.seed, "codec seed (sessions use 0)")->capture_default_str();
  cmd->add_option("-o,--out", a->out, "directory the tables are written to (DIR/tables.vqtab)")->required();
  return [a] { run(*a); };
}

}  // namespace veloxquant::cli
