#include "common/stream_copy.h"

#include <cstdint>
#include <cstring>

#include "common/page_prefetch.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace zc {

void StreamCopy(void* dst, const void* src, size_t bytes) {
  StreamCopyAhead(dst, src, bytes, kPrefetchAheadBytes);
}

void StreamCopyAhead(void* dst, const void* src, size_t bytes, size_t ahead) {
#if defined(__x86_64__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Plain stores up to the first 16-byte boundary of dst and after the last.
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  size_t body = bytes & ~size_t{63};
  for (size_t i = 0; i < body; i += 64) {
    // One line of every page, `ahead` bytes ahead of the copy.
    if ((i & (kPageBytes - 1)) == 0 && ahead && i + ahead < body) {
      __builtin_prefetch(s + i + ahead, 0, 0);
      __builtin_prefetch(d + i + ahead, 1, 0);
    }
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  memcpy(d + body, s + body, bytes - body);
#else
  (void)ahead;
  memcpy(dst, src, bytes);
#endif
}

void StreamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

void CopyForReader(void* dst, const void* src, size_t bytes, size_t from_bytes) {
  if (bytes >= from_bytes) {
    StreamCopy(dst, src, bytes);
    StreamFence();
  } else if (bytes) {
    memcpy(dst, src, bytes);
  }
}

}  // namespace zc
