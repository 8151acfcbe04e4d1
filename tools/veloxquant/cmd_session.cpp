// `veloxquant session info FILE` prints what a session file holds; `veloxquant session transcode
// IN OUT --kv SPEC` re-encodes its caches with another method.
#include <fmt/format.h>

#include "commands.h"
#include "run_stats.h"
#include "veloxquant/session_file.h"

namespace veloxquant::cli {
namespace {

struct SessionArgs {
  std::string file, out, kv;
};

void print_info(const std::string& path) {
  const SessionFile f = read_session_file(path);
  const ModelIdentity& m = f.model;
  uint64_t size = 12, stored = 0;
  for (const SessionSection& s : f.sections) size += s.bytes;
  for (const SessionFile::Layer& layer : f.layers)
    for (const auto* streams : {&layer.keys, &layer.values})
      for (const CacheStream& s : *streams) stored += s.codes.size() + s.tail.size();
  const uint64_t fp16 = uint64_t{2} * 2 * f.tokens.size() * m.layers * m.kv_heads * m.head_dim;
  fmt::print("file:           {} ({} bytes, format version {})\n", path, grouped(size), f.version);
  fmt::print("model:          {}, {} layers, {} heads, {} KV heads x {}, embedding {}, feed_forward "
             "{}, vocab {}, context {}\n", m.architecture, m.layers, m.heads, m.kv_heads, m.head_dim,
             m.embedding, m.feed_forward, m.vocab, m.context_length);
  fmt::print("weights hash:   0x{:016x}\n", m.weights_hash);
  fmt::print("tokenizer hash: 0x{:016x}\n", m.tokenizer_hash);
  fmt::print("kv spec:        {} (codec seed {})\n", f.kv_spec, f.codec_seed);
  std::string artifacts;
  for (const MethodArtifact& a : f.artifacts) {
    artifacts += fmt::format("{}{} ({} bytes, XXH64 0x{:016x})", artifacts.empty() ? "" : ", ", a.name, a.bytes, a.xxh64);
  }
  fmt::print("artifacts:      {}\n", artifacts.empty() ? "none" : artifacts);
  fmt::print("tokens:         {}\n", f.tokens.size());
  fmt::print("cache:          {} bytes of codes and fp16 tails, {:.2f}x smaller than fp16 (codec "
             "state is rebuilt from the spec)\n", grouped(stored),
             stored ? static_cast<double>(fp16) / static_cast<double>(stored) : 0.0);
  fmt::print("sections:       {:>10} {:>12}  tag\n", "offset", "bytes");
  fmt::print("                {:>10} {:>12}  header\n", 0, 12);
  for (const SessionSection& s : f.sections)
    fmt::print("                {:>10} {:>12}  {}\n", s.offset, s.bytes, s.tag);
}

}  // namespace

Command add_session_command(CLI::App& app) {
  auto a = std::make_shared<SessionArgs>();
  auto* cmd = app.add_subcommand("session", "Inspect or re-encode saved sessions (generate --save-session)");
  cmd->require_subcommand(1);
  auto* info = cmd->add_subcommand("info", "Print a session file's model, spec, tokens and sections");
  info->add_option("file", a->file, "session file")->required();
  auto* transcode = cmd->add_subcommand("transcode", "Re-encode a session's KV cache with another method");
  transcode->add_option("in", a->file, "session file to read")->required();
  transcode->add_option("out", a->out, "session file to write (replaced atomically)")->required();
  transcode->add_option("--kv", a->kv, "KV-cache method spec of the new file (see `veloxquant methods`)")->required();
  return [a, info] {
    if (info->parsed()) return print_info(a->file);
    transcode_session(read_session_file(a->file), a->kv, a->out);
    const SessionFile written = read_session_file(a->out);
    fmt::print("{}: {} tokens re-encoded as {}\n", a->out, written.tokens.size(), written.kv_spec);
  };
}

}  // namespace veloxquant::cli
