#include "ps/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace zc::ps {

void StreamCopy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  constexpr size_t kMin = 64 * 1024;
  if (bytes >= kMin) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    // Up to the destination's next 16-byte boundary with a plain copy.
    size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    memcpy(d + i, s + i, bytes - i);
    _mm_sfence();
    return;
  }
#endif
  if (bytes) memcpy(dst, src, bytes);
}

}  // namespace zc::ps
