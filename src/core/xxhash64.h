// XXH64 (Yann Collet's xxHash, 64-bit variant, as specified in xxHash's doc/xxhash_spec.md): the
// checksum of session-file sections and the hash behind model identities. Fast enough to run over
// a whole saved KV cache, and bit-compatible with the reference library, so other tools can
// verify the files.
#pragma once

#include <cstdint>
#include <span>

namespace veloxquant {

uint64_t xxhash64(std::span<const uint8_t> data, uint64_t seed = 0);

}  // namespace veloxquant
