/* zcomm benchmarks reference the C ABI weakly.
 *
 * The library is developed in parallel with the benchmarks; while a call is
 * not implemented yet, a strong reference would make the whole build fail at
 * link time. With weak references the benchmark links anyway, and at run time
 * ZC_NEED(fn) turns a missing symbol into a clear "not implemented" error that
 * perf/run_suite.py reports as "n/a". Once libzcomm exports every symbol the
 * weak references resolve exactly as strong ones would.
 *
 * zc_status_string alone is a strong reference: a library that only has weak
 * references is dropped from the executable by the linker's --as-needed, and
 * then none of the calls would resolve. */
#ifndef ZC_PERF_ZC_WEAK_H
#define ZC_PERF_ZC_WEAK_H

#include <zcomm/zcomm.h>

#pragma weak zc_init
#pragma weak zc_finalize
#pragma weak zc_abort
#pragma weak zc_rank
#pragma weak zc_size
#pragma weak zc_local_rank
#pragma weak zc_local_size
#pragma weak zc_last_error
#pragma weak zc_mem_alloc
#pragma weak zc_mem_free
#pragma weak zc_allreduce
#pragma weak zc_broadcast
#pragma weak zc_reduce
#pragma weak zc_allgather
#pragma weak zc_reduce_scatter
#pragma weak zc_alltoall
#pragma weak zc_barrier
#pragma weak zc_send
#pragma weak zc_recv
#pragma weak zc_last_algorithm

/* Non-zero when libzcomm provides fn. */
#define ZC_HAVE(fn) (&(fn) != 0)

#endif /* ZC_PERF_ZC_WEAK_H */
