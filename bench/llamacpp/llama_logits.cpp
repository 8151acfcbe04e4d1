// llama_logits: llama.cpp's logits for a token list, the oracle the golden files are made from.
// Built by bench/llamacpp/make_goldens.py against the llama.cpp it builds from the
// llama-cpp-python sdist; not part of the project's build.
//   llama_logits MODEL.gguf TOKENS OUT.npy [GREEDY [FLASH]]
// TOKENS is a comma-separated list of ids, all evaluated in one batch on the CPU (f16 KV cache,
// llama.cpp's default); OUT gets every position's logits as a [n, vocab] float32 .npy. With
// GREEDY > 0, that many tokens are then decoded one at a time by argmax and printed as ids.
// FLASH: on (the default on the CPU) or off, llama.cpp's flash attention; the two round
// differently (fp16 queries and an fp16 accumulator of values, or fp16 probabilities), which
// shows how far llama.cpp's logits move between its own attention paths.
#include <llama.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// A [rows, cols] little-endian float32 .npy (format 1.0; the header padded to 64 bytes).
bool write_npy(const char* path, const std::vector<float>& data, size_t rows, size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::FILE* f = std::fopen(path, "wb");
  if (!f) return false;
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                static_cast<unsigned char>(header.size() >> 8)};
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(len, 1, 2, f) == 2 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data.data(), 4, data.size(), f) == data.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string flash = argc == 6 ? argv[5] : "on";
  if (argc < 4 || argc > 6 || (flash != "on" && flash != "off")) {
    std::fprintf(stderr, "usage: llama_logits MODEL.gguf TOKENS OUT.npy [GREEDY [on|off]]\n");
    return 2;
  }
  std::vector<llama_token> tokens;
  for (const char* p = argv[2]; *p;) {
    char* end = nullptr;
    tokens.push_back(static_cast<llama_token>(std::strtol(p, &end, 10)));
    if (end == p) {
      std::fprintf(stderr, "llama_logits: '%s' is not a comma-separated list of token ids\n", argv[2]);
      return 2;
    }
    p = *end == ',' ? end + 1 : end;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "llama_logits: llama.cpp cannot load %s\n", argv[1]);
    return 2;
  }
  llama_context_params cp = llama_context_default_params();
  const int greedy = argc >= 5 ? std::atoi(argv[4]) : 0;
  cp.flash_attn_type = flash == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.n_ctx = static_cast<uint32_t>(tokens.size() + static_cast<size_t>(std::max(greedy, 0)));
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(tokens.size());
  cp.n_threads = cp.n_threads_batch = 2;
  llama_context* ctx = llama_init_from_model(model, cp);
  llama_batch batch = llama_batch_init(static_cast<int32_t>(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(tokens.size());
  if (!ctx || llama_decode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_logits: llama.cpp could not evaluate %zu tokens\n", tokens.size());
    return 2;
  }
  const size_t vocab = static_cast<size_t>(llama_vocab_n_tokens(llama_model_get_vocab(model)));
  std::vector<float> logits(tokens.size() * vocab);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float* row = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
    std::copy(row, row + vocab, logits.begin() + static_cast<std::ptrdiff_t>(i * vocab));
  }
  if (!write_npy(argv[3], logits, tokens.size(), vocab)) {
    std::fprintf(stderr, "llama_logits: cannot write %s\n", argv[3]);
    return 2;
  }
  // Greedy continuation: the argmax of the last logits, fed back one token at a time.
  const float* last = llama_get_logits_ith(ctx, static_cast<int32_t>(tokens.size() - 1));
  for (int g = 0; g < greedy; ++g) {
    llama_token next = static_cast<llama_token>(std::max_element(last, last + vocab) - last);
    std::printf(g ? ",%d" : "%d", next);
    llama_batch one = llama_batch_get_one(&next, 1);
    if (llama_decode(ctx, one) != 0) {
      std::fprintf(stderr, "llama_logits: llama.cpp could not decode greedy token %d\n", g);
      return 2;
    }
    last = llama_get_logits_ith(ctx, -1);
  }
  if (greedy > 0) std::printf("\n");
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
