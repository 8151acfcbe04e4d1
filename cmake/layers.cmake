# The library's layers, bottom to top (docs/architecture.md). A layer's code may include its own
# files and those of the layers it USES, never one above: cmake/check_layers.cmake enforces it on
# every build. Each layer names its folders under src/ and its public headers in
# include/veloxquant/; a folder or header in no layer fails the check too.
set(VELOXQUANT_LAYERS core cuda kv runtime eval serve)

# Numeric building blocks: tensors, SIMD, BLAS, RoPE, rotations, bit packing, the thread pool,
# spec parsing, and sampling a token from logits.
set(VELOXQUANT_LAYER_core_DIRS src/core)
set(VELOXQUANT_LAYER_core_HEADERS error.h tensor.h threads.h rope.h spec.h sampler.h)
set(VELOXQUANT_LAYER_core_USES "")

# The CUDA backend: device caches, attention, the device decoder and sampler (a separate target,
# veloxquant_cuda, that the kv layer links when the backend is built).
set(VELOXQUANT_LAYER_cuda_DIRS src/cuda)
set(VELOXQUANT_LAYER_cuda_HEADERS cuda.h cuda_decoder.h cuda_sampler.h cuda_vq.h)
set(VELOXQUANT_LAYER_cuda_USES core)

# Compressed KV caches: every method's codecs, the cache, eviction, calibration artifacts and the
# framing of the files that hold them.
set(VELOXQUANT_LAYER_kv_DIRS src/codecs src/cache src/calibration src/file_io)
set(VELOXQUANT_LAYER_kv_HEADERS codec.h pair_codec.h method.h cache.h calibration.h precomputed.h
  model_identity.h)
set(VELOXQUANT_LAYER_kv_USES core cuda)

# Running GGUF models: the reader, tokenizers, the model, sessions and their files, generation,
# perplexity, the calibrate pass.
set(VELOXQUANT_LAYER_runtime_DIRS src/runtime)
set(VELOXQUANT_LAYER_runtime_HEADERS gguf.h tokenizer.h model.h observer.h session_file.h
  generate.h perplexity.h calibrate.h chat_template.h)
set(VELOXQUANT_LAYER_runtime_USES core cuda kv)

# Measuring methods: `eval`, needle recall, synthetic KV benchmarks.
set(VELOXQUANT_LAYER_eval_DIRS src/eval)
set(VELOXQUANT_LAYER_eval_HEADERS eval.h)
set(VELOXQUANT_LAYER_eval_USES core cuda kv runtime)

# Serving: the OpenAI-compatible HTTP server and its continuous-batching scheduler.
set(VELOXQUANT_LAYER_serve_DIRS src/serve)
set(VELOXQUANT_LAYER_serve_HEADERS serve.h)
set(VELOXQUANT_LAYER_serve_USES core cuda kv runtime)
