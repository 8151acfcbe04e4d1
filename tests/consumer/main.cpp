// Compresses random keys and values with kivi, checks its attention against an fp16 cache's,
// and, given a GGUF model, decodes a few tokens through turboquant_mse caches. Exits 1 when
// anything is off, so a build of it against an installed VeloxQuant is a test of the install.
#include <veloxquant/cache.h>
#include <veloxquant/error.h>
#include <veloxquant/model.h>
#include <veloxquant/sampler.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace vq = veloxquant;

namespace {

int check_cache() {
  const size_t tokens = 256, kv_heads = 2, head_dim = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> k(tokens * kv_heads * head_dim), v(k.size()), q(kv_heads * head_dim), out(q.size()),
      want(q.size());
  for (float* values : {k.data(), v.data()})
    for (size_t i = 0; i < k.size(); ++i) values[i] = normal(rng);
  for (float& x : q) x = normal(rng);

  const vq::LayerShape shape{.kv_heads = kv_heads, .head_dim = head_dim};
  vq::KVCache kivi("kivi:kbits=4,vbits=4", shape), fp16("fp16", shape);
  for (vq::KVCache* cache : {&kivi, &fp16})
    cache->append(vq::TensorView::f32(k.data(), {tokens, kv_heads, head_dim}),
                  vq::TensorView::f32(v.data(), {tokens, kv_heads, head_dim}));
  const auto query = vq::TensorView::f32(q.data(), {1, kv_heads, head_dim});
  kivi.attend(query, out.data());
  fp16.attend(query, want.data());
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err += (out[i] - want[i]) * (out[i] - want[i]);
    norm += want[i] * want[i];
  }
  const double relative = std::sqrt(err / norm);
  std::printf("kivi:kbits=4,vbits=4: %zu bytes for %zu tokens (fp16 %zu), attention error %.4f of fp16's\n",
              kivi.bytes(), tokens, fp16.bytes(), relative);
  return kivi.bytes() < fp16.bytes() && relative < 0.2 ? 0 : 1;
}

int check_model(const char* path) {
  vq::Session session(vq::Model::load(path), {.kv_spec = "turboquant_mse:bits=4"});
  const vq::Tokenizer& tokenizer = session.model().tokenizer();
  vq::Sampler sampler({.temperature = 0});
  std::vector<int32_t> tokens = tokenizer.encode("Once upon a time", true);
  std::vector<int32_t> generated;
  for (int step = 0; step < 8; ++step) {
    session.eval(tokens, vq::Logits::Sample);
    const int32_t next = session.sample(sampler);
    sampler.accept(next);
    generated.push_back(next);
    tokens = {next};
  }
  std::printf("%s: \"%s\"\n", path, tokenizer.decode(generated).c_str());
  return generated.empty() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int failed = check_cache();
    if (argc > 1) failed |= check_model(argv[1]);
    return failed;
  } catch (const vq::Error& e) {
    std::fprintf(stderr, "veloxquant_consumer: %s\n", e.what());
    return 1;
  }
}
