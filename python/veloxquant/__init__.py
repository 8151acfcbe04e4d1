"""VeloxQuant: KV-cache compression codecs, caches and a GGUF model runtime.

Everything is defined by the extension module `_veloxquant` (python/src/); this package re-exports
it. Specs name methods as the CLI does: `veloxquant.methods()` lists them with their parameters.
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
    methods,
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
    "methods",
    "set_threads",
]
