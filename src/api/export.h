// Force-included into every source of libzcomm (meson.build): the library is
// compiled with hidden visibility, and the C ABI declared in zcomm.h and zcomm_engine.h is what
// libzcomm.so exports. Declaring it here first, under default visibility,
// makes every zc_* definition visible wherever it lives.
#pragma once
#ifdef __cplusplus
#pragma GCC visibility push(default)
#include <zcomm/zcomm.h>
#include <zcomm/zcomm_engine.h>
#pragma GCC visibility pop
#endif
