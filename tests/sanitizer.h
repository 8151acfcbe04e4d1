// Whether this test binary runs under a sanitizer (CI's AddressSanitizer and ThreadSanitizer
// passes). Those passes look for memory errors and races on every code path, which shorter
// inputs reach; the sweeps that only add length shorten there and the plain build runs them whole.
#pragma once

namespace veloxquant::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
#else
inline constexpr bool kUnderSanitizer = false;
#endif

}  // namespace veloxquant::test
