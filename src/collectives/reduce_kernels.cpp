// Public entry points of the reduction kernels: pick the table for this CPU
// once, then forward. Invalid dtype/op values are ignored here (callers
// validate once with CheckDtypeOp), so a bad value can never index past the
// tables.
#include "collectives/reduce_kernels.h"

#include <atomic>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "collectives/reduce_table.h"

namespace zc {
namespace {

using kernels::Table;

bool CpuHasAvx2() {
#if defined(__x86_64__) || defined(__i386__)
  // The builtin's avx2 check includes the OS saving the YMM state (XGETBV).
  // F16C from CPUID leaf 1 (ECX bit 29): clang's builtin does not know
  // "f16c" before clang 15 (scripts/fuzz.sh builds with clang).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
  return __builtin_cpu_supports("avx2") && f16c;
#else
  return false;
#endif
}

const Table& TableFor(KernelIsa isa) {
  return isa == KernelIsa::kAvx2 ? kernels::avx2::GetTable()
                                 : kernels::generic::GetTable();
}

KernelIsa BestIsa() {
  return CpuHasAvx2() ? KernelIsa::kAvx2 : KernelIsa::kGeneric;
}

struct Active {
  std::atomic<KernelIsa> isa{BestIsa()};
  std::atomic<const Table*> table{&TableFor(isa.load())};
};

Active& GetActive() {
  static Active active;
  return active;
}

const Table& Tbl() {
  return *GetActive().table.load(std::memory_order_relaxed);
}

// Bitwise ops have no floating entries in the tables (null).
bool Valid(zc_dtype d, zc_op op) {
  return IsValidDtype(d) && IsValidOp(op) && !(IsBitwise(op) && IsFloating(d));
}

}  // namespace

void ReduceInto(zc_dtype d, zc_op op, void* dst, const void* src,
                size_t count) {
  if (count == 0 || !Valid(d, op)) return;
  Tbl().binary[d][op](dst, dst, src, count);
}

void Reduce2(zc_dtype d, zc_op op, void* dst, const void* a, const void* b,
             size_t count) {
  if (count == 0 || !Valid(d, op)) return;
  Tbl().binary[d][op](dst, a, b, count);
}

void ReduceN(zc_dtype d, zc_op op, void* dst, const void* const* srcs, int n,
             size_t count) {
  if (count == 0 || n < 1 || !Valid(d, op)) return;
  Tbl().reduce_n[d][op](dst, srcs, n, count);
}

void ReduceOne(zc_dtype d, void* dst, const void* src, size_t count) {
  if (count == 0 || !IsValidDtype(d)) return;
  if (d == ZC_BOOL) {
    Tbl().binary[d][ZC_BOR](dst, src, src, count);
  } else if (dst != src) {
    std::memmove(dst, src, count * DtypeSize(d));
  }
}

void ScaleDiv(zc_dtype d, void* buf, size_t count, double divisor) {
  if (count == 0 || !IsValidDtype(d)) return;
  const Table::ScaleFn fn = Tbl().scale_div[d];
  if (fn != nullptr) fn(buf, count, divisor);
}

void HalfToFloatN(float* dst, const void* src, size_t count) {
  if (count != 0) Tbl().half_to_float(dst, src, count);
}
void FloatToHalfN(void* dst, const float* src, size_t count) {
  if (count != 0) Tbl().float_to_half(dst, src, count);
}
void BFloat16ToFloatN(float* dst, const void* src, size_t count) {
  if (count != 0) Tbl().bf16_to_float(dst, src, count);
}
void FloatToBFloat16N(void* dst, const float* src, size_t count) {
  if (count != 0) Tbl().float_to_bf16(dst, src, count);
}

KernelIsa ActiveKernelIsa() { return GetActive().isa.load(); }

const char* KernelIsaName(KernelIsa isa) {
  return isa == KernelIsa::kAvx2 ? "avx2" : "generic";
}

bool KernelIsaSupported(KernelIsa isa) {
  return isa == KernelIsa::kGeneric || CpuHasAvx2();
}

bool SetKernelIsa(KernelIsa isa) {
  if (!KernelIsaSupported(isa)) return false;
  Active& a = GetActive();
  a.isa.store(isa);
  a.table.store(&TableFor(isa));
  return true;
}

}  // namespace zc
