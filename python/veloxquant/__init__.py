"""VeloxQuant: KV-cache compression codecs, caches and a GGUF model runtime.

Everything is defined by the extension module `_veloxquant` (python/src/); this package re-exports
it. Specs name methods as the CLI does: `veloxquant.methods()` lists them with their parameters.
`veloxquant.hf` (imported on its own: it needs torch and transformers) plugs the caches into
Hugging Face transformers.
"""

from ._veloxquant import (
    Cache,
    Codec,
    Error,
    Generation,
    Method,
    Model,
    Param,
    PerplexityResult,
    ShapeError,
    SpecError,
    canonical_spec,
    cuda_available,
    cuda_unsupported,
    load_caches,
    methods,
    save_caches,
    set_threads,
)

__all__ = [
    "Cache",
    "Codec",
    "Error",
    "Generation",
    "Method",
    "Model",
    "Param",
    "PerplexityResult",
    "ShapeError",
    "SpecError",
    "canonical_spec",
    "cuda_available",
    "cuda_unsupported",
    "load_caches",
    "methods",
    "save_caches",
    "set_threads",
]

# The CUDA backend's cache, in a package built with VELOXQUANT_CUDA=ON (cuda_available).
if cuda_available:
    from ._veloxquant import DeviceCache  # noqa: F401

    __all__.append("DeviceCache")
