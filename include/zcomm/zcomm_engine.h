/* zcomm engine — Horovod-style named asynchronous collectives.
 *
 * The C ABI of the engine, for framework bindings (zcomm.torch). Written to
 * be easy to bind: opaque handles, names as C strings, shapes as int64
 * arrays, dtypes as zc_dtype, and handles that are polled or waited for (no
 * callbacks). docs/engine.md tells the whole story.
 *
 * A background thread of the engine owns the communication. Every rank
 * enqueues named operations in any order; the ranks agree, once per cycle
 * (ZC_CYCLE_TIME), on which names every rank has submitted, and run those.
 * A name seen before is agreed through a response cache: steady state costs
 * one tiny bit-vector allreduce per cycle. Ready allreduces of one dtype, op
 * and scale factors are fused into a registered buffer up to
 * ZC_FUSION_THRESHOLD bytes.
 *
 * Rules:
 *  - every call returns a zc_status; zc_last_error() gives the detail;
 *  - a name identifies one operation in flight: the same name may be used
 *    again once its handle is done; every rank must submit each name with
 *    the same operation, dtype, op, scale factors, root and shape (allgather
 *    and alltoall: the same shape except the first dimension). A mismatch
 *    fails that operation on every rank with ZC_ERR_MISMATCH naming the
 *    tensor, the ranks and both shapes, and the engine goes on (as Horovod):
 *    the name may be submitted again;
 *  - a local mistake (a bad argument, a name already pending on this rank)
 *    is ZC_ERR_INVALID_ARG from the submitting call, on that rank only; the
 *    engine goes on;
 *  - buffers belong to the engine from submission until the handle is done;
 *  - any other failure (a lost peer, zc_abort, a failed collective, a stall
 *    past ZC_STALL_SHUTDOWN, zc_engine_destroy on any rank) shuts every
 *    rank's engine down with the first cause: every pending handle and every
 *    later submission returns that error;
 *  - any thread may submit, poll and wait, concurrently.
 */
#ifndef ZCOMM_ZCOMM_ENGINE_H
#define ZCOMM_ZCOMM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <zcomm/zcomm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zc_engine zc_engine;
typedef struct zc_engine_handle zc_engine_handle;

/* Most dimensions of a tensor. */
#define ZC_ENGINE_MAX_DIMS 16
/* Longest tensor name in bytes (without the terminating NUL). */
#define ZC_ENGINE_MAX_NAME 1024

/* Collective over comm (every rank, in the same order as comm's other
 * collectives). The engine runs on a duplicate of comm (zc_comm_dup), so the
 * caller may go on using comm itself. Reads ZC_FUSION_THRESHOLD,
 * ZC_CYCLE_TIME, ZC_CACHE_CAPACITY, ZC_TIMELINE, ZC_STALL_WARNING and
 * ZC_STALL_SHUTDOWN. comm must outlive the engine. */
zc_status zc_engine_create(zc_comm* comm, zc_engine** engine);
/* Collective: stops the engine (the first rank to call it stops every
 * rank's engine at the same cycle; handles still pending there fail with
 * ZC_ERR_ABORTED naming that rank), writes the end of the timeline and frees
 * the engine. Handles stay valid until zc_engine_handle_free. Returns the
 * error that had shut the engine down, if any. */
zc_status zc_engine_destroy(zc_engine* engine);
/* Does not block: *error = ZC_OK while the engine runs, else the error that
 * shut it down (detail in zc_last_error()). */
zc_status zc_engine_error(zc_engine* engine, zc_status* error);

/* ---- operations: each returns a handle (ZC_OK) or fails at once ---------
 * name: a NUL-terminated string, unique among this rank's pending
 * operations. shape: ndims (0..ZC_ENGINE_MAX_DIMS) sizes >= 0; ndims 0 is a
 * scalar (one element). */

/* output = postscale * reduce_over_ranks(prescale * input). output may be
 * input (in place). Scaling follows Horovod's numerics: float32 is
 * multiplied by (float)factor in float32, float64 in double; float16 and
 * bfloat16 are widened to float32, multiplied by (float)factor and rounded
 * back (nearest even); integer dtypes (int8 to uint64, int16, uint16) are
 * scaled in double and converted back truncating toward zero, saturating at
 * the type's bounds. Scale factors are accepted on every dtype but bool:
 * factors other than 1 on ZC_BOOL, or factors that are not finite, are
 * ZC_ERR_INVALID_ARG. op ZC_AVG divides by the number of ranks (joined
 * ranks included, as Horovod). */
zc_status zc_engine_allreduce(zc_engine* engine, const char* name, const void* input,
                              void* output, int ndims, const int64_t* shape, zc_dtype dtype,
                              zc_op op, double prescale, double postscale,
                              zc_engine_handle** handle);
/* buf (in place): root's tensor on every rank. */
zc_status zc_engine_broadcast(zc_engine* engine, const char* name, void* buf, int ndims,
                              const int64_t* shape, zc_dtype dtype, int root,
                              zc_engine_handle** handle);
/* Concatenation over ranks along the first dimension, which may differ
 * between ranks (ndims >= 1). The output is the engine's: see
 * zc_engine_output. */
zc_status zc_engine_allgather(zc_engine* engine, const char* name, const void* input, int ndims,
                              const int64_t* shape, zc_dtype dtype, zc_engine_handle** handle);
/* splits[r] rows (first-dimension slices) of input go to rank r, in order;
 * splits NULL: shape[0] / size rows to each (shape[0] must divide evenly).
 * The output (the rows every rank sent here, in rank order) is the
 * engine's: zc_engine_output; zc_engine_received_splits gives the rows from
 * each rank. ndims >= 1. */
zc_status zc_engine_alltoall(zc_engine* engine, const char* name, const void* input, int ndims,
                             const int64_t* shape, zc_dtype dtype, const int64_t* splits,
                             zc_engine_handle** handle);
/* Reduces input over ranks and leaves rank r the r-th part along the first
 * dimension: shape[0] / size rows, the first shape[0] % size ranks one row
 * more (as Horovod). The output is the engine's: zc_engine_output. Scale
 * factors as for zc_engine_allreduce. */
zc_status zc_engine_reducescatter(zc_engine* engine, const char* name, const void* input,
                                  int ndims, const int64_t* shape, zc_dtype dtype, zc_op op,
                                  double prescale, double postscale, zc_engine_handle** handle);
/* Done once every rank has submitted its barrier (the n-th barrier of each
 * rank meets the n-th of the others). */
zc_status zc_engine_barrier(zc_engine* engine, zc_engine_handle** handle);
/* For uneven data: this rank has no more tensors. Until every rank has
 * joined, the other ranks' allreduces go on, this rank contributing zeros
 * (any other operation fails at once, without waiting for the other ranks,
 * on every rank that submits it while a rank has joined, with
 * ZC_ERR_INVALID_ARG naming it and the joined rank; the engine goes on).
 * Done when every rank has joined;
 * zc_engine_join_result gives the last rank to join. */
zc_status zc_engine_join(zc_engine* engine, zc_engine_handle** handle);

/* ---- handles ------------------------------------------------------------ */

/* *done = 1 when the operation has finished; returns its status then
 * (ZC_OK while not done). */
zc_status zc_engine_poll(zc_engine_handle* handle, int* done);
/* Waits until the operation has finished and returns its status. At most
 * ZC_TIMEOUT seconds: then ZC_ERR_TIMEOUT naming the tensor, and the handle
 * stays pending (a peer that never submits it is reported by the stall
 * inspector, ZC_STALL_WARNING). Does not free the handle. */
zc_status zc_engine_wait(zc_engine_handle* handle);
/* After a successful finish: the result. allgather, alltoall and
 * reducescatter: the engine's buffer (valid until zc_engine_handle_free);
 * allreduce and broadcast: the caller's output buffer. *ndims and shape
 * (ZC_ENGINE_MAX_DIMS entries, may be NULL) describe it. barrier and join:
 * *data NULL, *ndims 0. Any pointer argument but handle may be NULL. */
zc_status zc_engine_output(const zc_engine_handle* handle, const void** data, int* ndims,
                           int64_t* shape);
/* alltoall: rows received from each rank (size entries). */
zc_status zc_engine_received_splits(const zc_engine_handle* handle, int64_t* splits);
/* join: the last rank to join (the highest of those that joined in the
 * last cycle). */
zc_status zc_engine_join_result(const zc_engine_handle* handle, int* last_rank);
/* Frees the handle (and an engine-owned output). A pending handle may be
 * freed: the engine finishes the operation and drops the result. */
zc_status zc_engine_handle_free(zc_engine_handle* handle);

/* ---- counters, for benchmarks and tests ---------------------------------- */

typedef struct {
  uint64_t cycles;                  /* negotiation cycles run */
  uint64_t negotiation_collectives; /* collectives of negotiation (bit vector, request exchange) */
  uint64_t cache_hits;              /* operations agreed through the response cache */
  uint64_t cache_misses;            /* operations negotiated through the request exchange */
  uint64_t fused_sets;              /* fused allreduces of two tensors or more */
  uint64_t fused_tensors;           /* tensors reduced inside those */
  uint64_t data_collectives;        /* collectives that moved tensor data */
  uint64_t plan_reuses;             /* fused sets run through a cached persistent plan */
  uint64_t operations_done;         /* operations completed (any status) */
  uint64_t stall_warnings;          /* stall reports (counted on every rank) */
  uint64_t cache_entries;           /* entries in the response cache now */
} zc_engine_stats;
/* Copies min(bytes, sizeof(zc_engine_stats)) bytes of the counters into
 * stats (pass sizeof(zc_engine_stats): later versions only append). */
zc_status zc_engine_get_stats(zc_engine* engine, zc_engine_stats* stats, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZCOMM_ZCOMM_ENGINE_H */
