/* zcomm — zero-copy communication for distributed deep learning.
 *
 * The C ABI. Frameworks and outside programs are compiled against this header
 * (`pkg-config --cflags --libs zcomm`). Names, arguments and meanings of the
 * declarations below are a contract: they are extended, never changed.
 *
 * Rules that hold for every call:
 *  - every call returns a zc_status; zc_last_error() gives the detail of the
 *    calling thread's last failure (rank, peer, operation and cause);
 *  - count 0 is valid and does nothing;
 *  - a NULL buffer with count > 0, a rank out of range, an unknown dtype or op
 *    gives ZC_ERR_INVALID_ARG on the calling rank; the communicator stays usable;
 *  - no call waits forever: every wait has a deadline (ZC_TIMEOUT seconds);
 *  - buffers may be reused as soon as a blocking call returns;
 *  - any thread may call; one collective at a time per communicator.
 */
#ifndef ZCOMM_ZCOMM_H
#define ZCOMM_ZCOMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZCOMM_VERSION_MAJOR 0
#define ZCOMM_VERSION_MINOR 1
#define ZCOMM_VERSION_PATCH 0

typedef struct zc_comm zc_comm;
typedef struct zc_request zc_request;

typedef enum {
  ZC_OK = 0,
  ZC_ERR_INVALID_ARG,
  ZC_ERR_MISMATCH,
  ZC_ERR_TIMEOUT,
  ZC_ERR_PEER_LOST,
  ZC_ERR_ABORTED,
  ZC_ERR_NO_MEMORY,
  ZC_ERR_UNSUPPORTED,
  ZC_ERR_SYSTEM,
  ZC_ERR_INTERNAL
} zc_status;

/* float16 and bfloat16 are stored as 16-bit words.
 *
 * ZC_INT16 and ZC_UINT16 are 16-bit integers; like the other integer types
 * their sums and products wrap around (two's complement).
 *
 * ZC_BOOL is one byte per element: 0 is false, any other byte value is true.
 * Its reductions are logical, as torch.distributed's: ZC_SUM and ZC_MAX are
 * "or", ZC_PROD and ZC_MIN are "and"; ZC_BAND, ZC_BOR and ZC_BXOR are "and",
 * "or" and "xor" of the truth values. A reduction (allreduce, reduce,
 * reduce-scatter, their nonblocking variants and plans, with any number of
 * ranks, a single rank included) writes only 0 or 1. Operations that only
 * move data (broadcast, allgather, alltoall, gather, scatter, send/recv)
 * copy the bytes as they are. */
typedef enum {
  ZC_INT8,
  ZC_UINT8,
  ZC_INT32,
  ZC_UINT32,
  ZC_INT64,
  ZC_UINT64,
  ZC_FLOAT16,
  ZC_BFLOAT16,
  ZC_FLOAT32,
  ZC_FLOAT64,
  ZC_INT16,  /* = 10 */
  ZC_UINT16, /* = 11 */
  ZC_BOOL    /* = 12 */
} zc_dtype;

/* ZC_AVG is a sum scaled once at the end; on integer types (int8 to uint64,
 * int16, uint16) and on bool it is ZC_ERR_INVALID_ARG. ZC_BAND, ZC_BOR and
 * ZC_BXOR (bitwise and, or, xor) are for integer types and bool only; on
 * float16, bfloat16, float32 and float64 they are ZC_ERR_INVALID_ARG. */
typedef enum { ZC_SUM, ZC_PROD, ZC_MIN, ZC_MAX, ZC_AVG, ZC_BAND, ZC_BOR, ZC_BXOR } zc_op;

/* ---- lifetime ------------------------------------------------------------ */

/* Creates a communicator from the environment: zcrun's store (ZC_STORE),
 * PMIx (mpirun, srun), or, with neither, a communicator of size 1. */
zc_status zc_init(zc_comm** comm);
zc_status zc_finalize(zc_comm* comm);
/* Pending and later operations fail with ZC_ERR_ABORTED; peers learn of it. */
zc_status zc_abort(zc_comm* comm);

int zc_rank(const zc_comm* comm);
int zc_size(const zc_comm* comm);
int zc_local_rank(const zc_comm* comm);
int zc_local_size(const zc_comm* comm);

const char* zc_status_string(zc_status s);
/* Detail of the calling thread's last failure ("" when none). */
const char* zc_last_error(const zc_comm* comm);

/* ---- memory -------------------------------------------------------------- */

/* Zero-copy memory: registered with the transport, peers write into it
 * directly. Any other memory works too, through the registration cache. */
zc_status zc_mem_alloc(zc_comm* comm, size_t bytes, void** ptr);
zc_status zc_mem_free(zc_comm* comm, void* ptr);

/* ---- collectives --------------------------------------------------------- */

/* sendbuf == recvbuf: in place. */
zc_status zc_allreduce(zc_comm* comm, const void* sendbuf, void* recvbuf,
                       size_t count, zc_dtype dtype, zc_op op);
zc_status zc_broadcast(zc_comm* comm, void* buf, size_t count, zc_dtype dtype,
                       int root);
/* recvbuf is used at root only. */
zc_status zc_reduce(zc_comm* comm, const void* sendbuf, void* recvbuf,
                    size_t count, zc_dtype dtype, zc_op op, int root);
/* recvbuf holds size x sendcount elements, in rank order. */
zc_status zc_allgather(zc_comm* comm, const void* sendbuf, void* recvbuf,
                       size_t sendcount, zc_dtype dtype);
/* sendbuf holds size x recvcount elements. */
zc_status zc_reduce_scatter(zc_comm* comm, const void* sendbuf, void* recvbuf,
                            size_t recvcount, zc_dtype dtype, zc_op op);
/* count elements to and from each rank. */
zc_status zc_alltoall(zc_comm* comm, const void* sendbuf, void* recvbuf,
                      size_t count, zc_dtype dtype);
zc_status zc_barrier(zc_comm* comm);

/* ---- point to point ------------------------------------------------------ */

/* Blocking point to point. Messages between a pair of ranks with the same tag
 * arrive in the order they were sent; different tags may be received in any
 * order. Sizes must match: a receive whose size differs from the message's
 * fails with ZC_ERR_MISMATCH naming both sizes. The sender learns of it only
 * for large messages (above the eager limit: 8 KiB to a peer on this host,
 * 32 KiB across the network), whose send also fails with ZC_ERR_MISMATCH;
 * a small (eager) send has already returned ZC_OK when the receiver finds
 * the mismatch. */
zc_status zc_send(zc_comm* comm, const void* buf, size_t bytes, int peer,
                  int tag);
zc_status zc_recv(zc_comm* comm, void* buf, size_t bytes, int peer, int tag);

/* ---- nonblocking --------------------------------------------------------- */

zc_status zc_iallreduce(zc_comm* comm, const void* sendbuf, void* recvbuf,
                        size_t count, zc_dtype dtype, zc_op op,
                        zc_request** req);
zc_status zc_test(zc_request* req, int* done);
/* Completes and frees req. */
zc_status zc_wait(zc_request* req);

/* ---- extensions ---------------------------------------------------------- */

/* Size in bytes of one element of dtype; 0 for an unknown dtype. */
size_t zc_dtype_size(zc_dtype dtype);
/* Names the algorithm the last collective on this thread used ("ring",
 * "hd" (halving-doubling), "shm" (direct shared memory), "hier"
 * (hierarchical allreduce across hosts), "tree", "chain", "pairwise",
 * "dissemination", "direct" (gather, scatter), "local"). For
 * benchmarks and tests. */
const char* zc_last_algorithm(const zc_comm* comm);

/* Nonblocking variants of every collective: queued in call order on the
 * communicator, whose progress thread runs them without the caller's help;
 * complete each with zc_test/zc_wait (zc_wait runs the queued collectives
 * up to its own on the calling thread when the progress thread has not
 * started them, so a wait right after the call costs no thread switch).
 * Same arguments and rules as the blocking calls. Several may be queued at
 * once (they run one at a time, in call order, on every rank alike); a
 * blocking collective is refused (ZC_ERR_INVALID_ARG) until they are done. */
zc_status zc_ibroadcast(zc_comm* comm, void* buf, size_t count, zc_dtype dtype,
                        int root, zc_request** req);
zc_status zc_ireduce(zc_comm* comm, const void* sendbuf, void* recvbuf,
                     size_t count, zc_dtype dtype, zc_op op, int root,
                     zc_request** req);
zc_status zc_iallgather(zc_comm* comm, const void* sendbuf, void* recvbuf,
                        size_t sendcount, zc_dtype dtype, zc_request** req);
zc_status zc_ireduce_scatter(zc_comm* comm, const void* sendbuf, void* recvbuf,
                             size_t recvcount, zc_dtype dtype, zc_op op,
                             zc_request** req);
zc_status zc_ialltoall(zc_comm* comm, const void* sendbuf, void* recvbuf,
                       size_t count, zc_dtype dtype, zc_request** req);
zc_status zc_ibarrier(zc_comm* comm, zc_request** req);

/* Persistent allreduce (init once, start/wait many times). Init is
 * collective (every rank, same count/dtype/op, same order as the other
 * collectives) and sets up every link and descriptor, so each start is only
 * one-sided writes and flags. count > 0. Between start and wait the buffers
 * belong to zcomm and no other collective may run on the communicator. */
typedef struct zc_plan zc_plan;
zc_status zc_allreduce_plan_init(zc_comm* comm, size_t count, zc_dtype dtype,
                                 zc_op op, zc_plan** plan);
zc_status zc_plan_start(zc_plan* plan, const void* sendbuf, void* recvbuf);
zc_status zc_plan_wait(zc_plan* plan);
zc_status zc_plan_free(zc_plan* plan);

/* Any memory can be passed to zcomm: user memory is registered with the
 * transport on first use and the registration is cached by address range.
 * Before freeing (or unmapping) such memory, drop its registrations, as with
 * NCCL's ncclCommDeregister; otherwise an RDMA registration keeps pinning
 * the old pages and a new buffer at the same address would be mistaken for
 * it. Memory from zc_mem_alloc or zc_site_alloc never needs this. */
zc_status zc_mem_deregister(zc_comm* comm, const void* ptr, size_t bytes);

/* Allocation-site hook (Xue et al. EuroSys'19 section 3.4), for frameworks.
 * Allocate tensors through an id of the site that creates them (an op, a
 * line). A site's memory is plain memory until one of its buffers is sent
 * to a peer; from then on the site's allocations come from the registered
 * pool, so later iterations send them with no registration and no copy. */
zc_status zc_site_alloc(zc_comm* comm, uint64_t site, size_t bytes, void** ptr);
/* ptr from zc_site_alloc (NULL: nothing). */
zc_status zc_site_free(zc_comm* comm, void* ptr);
/* *pooled = 1 once the site's allocations come from the pool. */
zc_status zc_site_pooled(const zc_comm* comm, uint64_t site, int* pooled);
/* *is_pool = 1 when ptr is the start of registered pool memory
 * (zc_mem_alloc, or a pooled site's allocation). */
zc_status zc_mem_is_pool(const zc_comm* comm, const void* ptr, int* is_pool);

/* ---- communicators for frameworks ---------------------------------------
 * docs/frameworks.md has the whole story and an example. */

/* The library's version (the ZCOMM_VERSION_* of the build). */
void zc_version(int* major, int* minor, int* patch);

/* A communicator from a framework's own rendezvous, as ncclGetUniqueId /
 * ncclCommInitRank. One rank calls zc_get_unique_id and must itself take part
 * (it serves the rendezvous); the id is plain bytes that any means can carry
 * (a file, a pipe, MPI, torch's store) to every rank, and each calls
 * zc_comm_init_rank with the same nranks and its own rank in [0, nranks).
 * The id carries the rendezvous address (chosen by ZC_SOCKET_IFNAME) and a
 * fresh random job key that authenticates every connection of the job. It is
 * checked (magic, checksum) before anything is connected. Errors: a corrupted
 * or stale id, ranks that disagree on nranks, a rank claimed twice, a rank
 * out of range (ZC_ERR_INVALID_ARG or ZC_ERR_MISMATCH), and ranks that never
 * arrive (ZC_ERR_TIMEOUT after ZC_TIMEOUT, naming them). */
typedef struct { char internal[128]; } zc_unique_id;
zc_status zc_get_unique_id(zc_unique_id* id);
zc_status zc_comm_init_rank(zc_comm** comm, int nranks, const zc_unique_id* id, int rank);

/* Sub-communicators (MPI_Comm_split semantics: ranks ordered by key, then old
 * rank; color ZC_SPLIT_NONE gives *newcomm = NULL) and duplicates. Collective
 * over comm. The new communicator shares comm's connections and registered
 * pool (no new connection setup) and has its own collective state, so it may
 * run collectives from its own thread at the same time as comm. Finalize
 * each with zc_finalize, in any order. Communicators that share connections
 * share their fate: zc_abort, or a collective that fails once started
 * (timeout, lost peer, mismatch), on one of them fails the others too. */
#define ZC_SPLIT_NONE (-1)
zc_status zc_comm_split(zc_comm* comm, int color, int key, zc_comm** newcomm);
zc_status zc_comm_dup(zc_comm* comm, zc_comm** newcomm);

/* Does not block: *error = ZC_OK, or the error that broke the communicator (a
 * lost peer, an abort), for a framework's watchdog thread; the detail is in
 * zc_last_error() of the calling thread. Returns ZC_OK when the query itself
 * worked. */
zc_status zc_comm_get_async_error(zc_comm* comm, zc_status* error);

/* Point to point, nonblocking; completed by zc_test/zc_wait. Several may be
 * in flight at once, also alongside one collective, in any order of
 * completion. Matching and size rules as zc_send/zc_recv; the buffer belongs
 * to zcomm until the request completes. */
zc_status zc_isend(zc_comm* comm, const void* buf, size_t bytes, int peer, int tag,
                   zc_request** req);
zc_status zc_irecv(zc_comm* comm, void* buf, size_t bytes, int peer, int tag,
                   zc_request** req);

/* Receive from any source: ZC_ANY_SOURCE as the peer of zc_recv, zc_irecv,
 * zc_recv_source or zc_irecv_source takes the next message with the tag
 * from whichever rank of the communicator sends one. zc_recv_source and
 * zc_irecv_source (peer: a rank or ZC_ANY_SOURCE) also report the sender:
 * *source (source may be NULL) holds its rank when zc_recv_source returns,
 * and when zc_test reports the request done or zc_wait returns. On an error
 * *source is the sender when a message had matched (a size mismatch), else
 * ZC_ANY_SOURCE.
 *
 * Order. Receives match in the order they were posted: a message goes to
 * the earliest posted receive that accepts it (its sender, or any source,
 * and its tag), so among the messages of one sender with one tag an
 * any-source receive takes the earliest one (per-sender FIFO, as MPI). No
 * order holds across senders, which write independently: an any-source
 * receive takes a message that has already arrived at once, looking at the
 * senders round-robin from the one after the sender it last matched, so no
 * sender's messages wait behind another's stream.
 *
 * Sizes as zc_recv: a message of another size fails the receive with
 * ZC_ERR_MISMATCH naming both sizes and the sender (and, above the eager
 * limit, the sender's call too). Arguments: a NULL buf with bytes > 0, a
 * peer that is neither ZC_ANY_SOURCE nor another rank of the communicator,
 * a negative tag, or ZC_ANY_SOURCE in a communicator of one rank give
 * ZC_ERR_INVALID_ARG at once. A peer lost while an any-source receive has
 * matched nothing fails it with ZC_ERR_PEER_LOST naming that peer (its
 * message may have been the one awaited; as MPI's ULFM), after messages
 * already arrived from the others were matched; an abort fails it with
 * ZC_ERR_ABORTED; with no sender it fails with ZC_ERR_TIMEOUT after
 * ZC_TIMEOUT. */
#define ZC_ANY_SOURCE (-1)
zc_status zc_recv_source(zc_comm* comm, void* buf, size_t bytes, int peer, int tag,
                         int* source);
zc_status zc_irecv_source(zc_comm* comm, void* buf, size_t bytes, int peer, int tag,
                          int* source, zc_request** req);

/* Counts and displacements are in elements of dtype, one per rank. */
zc_status zc_allgatherv(zc_comm* comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                        const size_t* recvcounts, const size_t* displs, zc_dtype dtype);
zc_status zc_alltoallv(zc_comm* comm, const void* sendbuf, const size_t* sendcounts,
                       const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                       const size_t* rdispls, zc_dtype dtype);
/* Allgather into one buffer per rank, as frameworks hold their outputs (a
 * list of tensors): rank k's sendcount elements land in recvbufs[k]
 * (size pointers to buffers that need not be adjacent), with no gathered
 * copy in between. The same collective as zc_allgather: ranks may mix the
 * two calls. In place: sendbuf == recvbufs[rank]. The buffers must not
 * overlap one another, nor sendbuf any but recvbufs[rank]. Device buffers
 * are staged through host memory (never CUDA IPC). The nonblocking call
 * reads the recvbufs array before it returns. */
zc_status zc_allgather_list(zc_comm* comm, const void* sendbuf, void* const* recvbufs,
                            size_t sendcount, zc_dtype dtype);
zc_status zc_iallgather_list(zc_comm* comm, const void* sendbuf, void* const* recvbufs,
                             size_t sendcount, zc_dtype dtype, zc_request** req);
/* As in MPI and zc_reduce, gather's recvbuf (size x count elements, in rank
 * order) and scatter's sendbuf (size x count elements) matter only at the
 * root (NULL elsewhere). */
zc_status zc_gather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                    zc_dtype dtype, int root);
zc_status zc_scatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                     zc_dtype dtype, int root);

/* Nonblocking variants of the vector collectives, gather and scatter (the
 * rules of the nonblocking calls above). The count and displacement arrays
 * are read before the call returns. */
zc_status zc_iallgatherv(zc_comm* comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                         const size_t* recvcounts, const size_t* displs, zc_dtype dtype,
                         zc_request** req);
zc_status zc_ialltoallv(zc_comm* comm, const void* sendbuf, const size_t* sendcounts,
                        const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                        const size_t* rdispls, zc_dtype dtype, zc_request** req);
zc_status zc_igather(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                     zc_dtype dtype, int root, zc_request** req);
zc_status zc_iscatter(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                      zc_dtype dtype, int root, zc_request** req);

/* For frameworks whose operations are several calls (staging copies, a
 * collective whose sizes come from another): runs fn(arg) in the
 * communicator's order of nonblocking collectives, on its progress thread
 * or on a thread waiting in zc_wait, and completes *req with what fn
 * returns. Inside fn the blocking collectives of comm may be called (they
 * are in order there, and are not refused as in flight); fn must not wait
 * for another request of comm. */
zc_status zc_comm_enqueue(zc_comm* comm, zc_status (*fn)(void* arg), void* arg, zc_request** req);
/* Calls fn(arg, status) once when the nonblocking collective or the
 * zc_comm_enqueue request req completes, on the thread that completes it
 * (at once, on the calling thread, if it has completed already): for a
 * framework's futures, without a thread of its own; zc_test and zc_wait
 * report req complete only once fn has returned. fn must return quickly
 * and must not call zcomm. req must still be freed by zc_wait (which
 * returns at once once fn has been called); it stays valid until then.
 * ZC_ERR_INVALID_ARG for point-to-point requests (their completion is
 * driven by zc_test/zc_wait) or a second call on the same request. */
zc_status zc_request_notify(zc_request* req, void (*fn)(void* arg, zc_status status), void* arg);

/* ---- Parameter server (docs/ps.md) ----
 * Push/pull of named tensors ("keys") through servers, as in the paper's
 * data-parallel training: workers push gradients, servers aggregate them
 * (sum, or built-in SGD), workers pull the result. Keys are cut into chunks
 * of at most ZC_PS_PARTITION bytes spread over the servers (ZC_PS_PLACEMENT); each
 * push is one one-sided write per chunk into a slot registered on the
 * server at declare time, and each reply is written by the server straight
 * into the worker's registered reply place: no RPC, no serialization. */
typedef struct zc_ps zc_ps;
typedef enum { ZC_PS_WORKER, ZC_PS_SERVER, ZC_PS_BOTH } zc_ps_role;
typedef struct {
  int async;       /* 0: synchronous rounds (default); 1: pushes applied on arrival, pulls at once */
  double sgd_lr;   /* 0: the server keeps sums; > 0: the server keeps values and applies
                      value -= sgd_lr * mean(pushes of the round) (async: of each push) */
} zc_ps_options;
/* Collective over comm; roles may differ per rank (at least one worker and
 * one server; ZC_PS_BOTH runs the server on threads of the worker's
 * process). Options must be equal on every rank (else ZC_ERR_MISMATCH). The
 * zc_ps has its own context over comm's connections: comm stays usable, and
 * must outlive the zc_ps. */
zc_status zc_ps_create(zc_comm* comm, zc_ps_role role, const zc_ps_options* options /* NULL: defaults */, zc_ps** ps);
/* Ranks with the worker (ZC_PS_WORKER, ZC_PS_BOTH) and server (ZC_PS_SERVER,
 * ZC_PS_BOTH) roles; -1 for a NULL ps. */
int zc_ps_num_workers(const zc_ps* ps);
int zc_ps_num_servers(const zc_ps* ps);
/* Workers, every worker the same keys in the same order; init (from the first worker; NULL: zeros).
 * Blocks until every worker has declared the key. count >= 1; sgd_lr > 0
 * needs a floating dtype. Errors: a key declared twice or a bad argument
 * (ZC_ERR_INVALID_ARG, on the calling rank), workers that disagree on key,
 * count or dtype (ZC_ERR_MISMATCH on every worker). */
zc_status zc_ps_declare(zc_ps* ps, uint64_t key, size_t count, zc_dtype dtype, const void* init);
/* buf holds the key's count elements of its dtype. Synchronous mode: in round
 * r each worker pushes once, then pulls; the pull returns, once every
 * worker's round-r push has arrived, the round's sum (sgd_lr = 0) or the
 * value after the update (sgd_lr > 0). Pushing twice in a round or pulling
 * before pushing is ZC_ERR_INVALID_ARG on the calling rank. Asynchronous
 * mode: a push is added to (sgd: applied to) the value when it arrives; a
 * pull returns the current value (init, plus pushes) at once; any order.
 * An undeclared key is ZC_ERR_INVALID_ARG. A lost server or worker fails
 * every pending and later push/pull on every rank, naming it. The buffer may
 * be reused as soon as zc_ps_push returns. */
zc_status zc_ps_push(zc_ps* ps, uint64_t key, const void* buf);
zc_status zc_ps_pull(zc_ps* ps, uint64_t key, void* buf);
/* Nonblocking push/pull, run in call order with the blocking ones; order
 * errors are returned at once, transfer errors by zc_test/zc_wait. The
 * buffer belongs to zcomm until the request completes. */
zc_status zc_ps_ipush(zc_ps* ps, uint64_t key, const void* buf, zc_request** req);
zc_status zc_ps_ipull(zc_ps* ps, uint64_t key, void* buf, zc_request** req);
/* Server-only ranks: serve until every worker has freed its zc_ps. Returns
 * ZC_OK then, or the error that ended the service (a lost member). */
zc_status zc_ps_serve(zc_ps* ps);
/* Collective over comm's ranks: workers finish their queued operations and
 * say goodbye; servers serve until every worker has; then the memory goes.
 * Completes every rank's part even after an error (and returns it). */
zc_status zc_ps_free(zc_ps* ps);

/* ---- Flight recorder: what each rank was doing (docs/debugging.md) ----
 * Every communicator records its last ZC_TRACE_BUFFER_SIZE operations
 * (default 2000; 0 turns the recorder off): collectives with their sequence
 * number, dtype, count, root, algorithm and transport; sends and receives
 * with peer, tag and size; each with the caller's label, its state (posted,
 * started, completed, failed with its status) and times (to about a
 * millisecond; ZC_TRACE_CLOCK=precise times every call). Recording takes no
 * lock. With ZC_TRACE_DIR set, a rank writes its communicators' records to
 * that folder as JSON when a call fails (timeout, lost peer, abort,
 * mismatch) and when the process receives SIGUSR2; zcrun sets a temporary
 * folder for its ranks and prints the job's diagnosis when a job fails.
 * `python3 -m zcomm.trace DIR` reads the files of any job. */

/* Writes comm's records as JSON (docs/debugging.md, "The dump format") to
 * path; path NULL: into ZC_TRACE_DIR, under the name the automatic dumps use
 * (ZC_ERR_INVALID_ARG when ZC_TRACE_DIR is unset). The file is written
 * whole or not at all (a temporary file renamed). ZC_ERR_SYSTEM names the
 * file when it cannot be written. With the recorder off it holds no
 * records. */
zc_status zc_comm_dump_trace(zc_comm* comm, const char* path);

/* Labels the operations the calling thread starts from now on, on any
 * communicator (a framework's op, a tensor or key name); NULL or "" clears
 * the label. At most 47 bytes are kept. Always ZC_OK. */
zc_status zc_trace_set_label(const char* label);

/* ---- Stream-ordered calls (CUDA) -----------------------------------------
 * Every collective and send/recv in stream order, as NCCL's: `stream` is a
 * CUstream / cudaStream_t passed as void* (NULL: the legacy default
 * stream). The call returns at once, without waiting for the stream or the
 * network; the operation starts after the work already queued on the
 * stream (it reads the inputs once the stream has reached the call), and
 * work queued on the stream after the call waits until the outputs are
 * written. The host never needs to synchronise in between: a kernel that
 * writes the input, the call, and a kernel that reads the output may be
 * queued back to back. Buffers may be device or host memory, mixed; the
 * call's arguments and the rules of the matching plain call apply (the
 * collectives run in call order with the nonblocking ones, on every rank
 * alike). Device buffers are staged through pinned host memory by copies
 * on the stream; the host collective runs on the communicator's progress
 * thread. The stream waits for the result through
 * cuStreamWaitValue32 on host memory (a host function where the driver
 * lacks it).
 *
 * *req (req may be NULL) completes with the operation's status once its
 * host part is done; the outputs are then written in stream order (the host
 * sees them after cuStreamSynchronize or an event). An operation that
 * fails still lets the stream go on (its outputs are undefined): the error
 * is the request's, and zc_comm_get_async_error reports it. A send's input
 * is copied when the stream reaches it, so later work on the stream does
 * not wait for the message to be delivered; its request completes when it
 * has been. Sends on streams are posted in call order once the stream has
 * reached them; receives are posted at the call.
 *
 * Where no CUDA stream can exist (a build without CUDA, or no CUDA driver
 * loaded in the process) only stream NULL is accepted: nothing can be
 * queued on it, and the call is the nonblocking collective (or isend /
 * irecv) on the buffers; another stream is ZC_ERR_UNSUPPORTED.
 * docs/gpu.md. */
zc_status zc_allreduce_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                 zc_dtype dtype, zc_op op, void* stream, zc_request** req);
zc_status zc_broadcast_on_stream(zc_comm* comm, void* buf, size_t count, zc_dtype dtype, int root,
                                 void* stream, zc_request** req);
zc_status zc_reduce_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                              zc_dtype dtype, zc_op op, int root, void* stream, zc_request** req);
zc_status zc_allgather_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                 zc_dtype dtype, void* stream, zc_request** req);
zc_status zc_reduce_scatter_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf,
                                      size_t recvcount, zc_dtype dtype, zc_op op, void* stream,
                                      zc_request** req);
zc_status zc_alltoall_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                zc_dtype dtype, void* stream, zc_request** req);
zc_status zc_barrier_on_stream(zc_comm* comm, void* stream, zc_request** req);
zc_status zc_allgatherv_on_stream(zc_comm* comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                  const size_t* recvcounts, const size_t* displs, zc_dtype dtype,
                                  void* stream, zc_request** req);
zc_status zc_alltoallv_on_stream(zc_comm* comm, const void* sendbuf, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                 const size_t* rdispls, zc_dtype dtype, void* stream, zc_request** req);
zc_status zc_gather_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                              zc_dtype dtype, int root, void* stream, zc_request** req);
zc_status zc_scatter_on_stream(zc_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                               zc_dtype dtype, int root, void* stream, zc_request** req);
zc_status zc_send_on_stream(zc_comm* comm, const void* buf, size_t bytes, int peer, int tag,
                            void* stream, zc_request** req);
zc_status zc_recv_on_stream(zc_comm* comm, void* buf, size_t bytes, int peer, int tag, void* stream,
                            zc_request** req);

/* ---- Fault tolerance: revoke, agree, shrink (docs/elastic.md) ----------
 * MPI ULFM's semantics (MPIX_Comm_revoke, MPIX_Comm_agree,
 * MPIX_Comm_shrink), so that a job survives the loss of ranks without a
 * restart. A lost rank (its process exited, its connections broke) already
 * fails every pending and later operation on every survivor with
 * ZC_ERR_PEER_LOST or ZC_ERR_ABORTED within milliseconds (see zc_abort);
 * the survivors then call zc_comm_shrink and go on with the communicator it
 * returns. Communicators that share connections (zc_comm_split,
 * zc_comm_dup) share their fate here too: a revoke, a lost rank or a shrink
 * of one is one of all of them. */

/* Revokes comm: every pending and later operation on comm (and on every
 * communicator sharing its connections) fails, on every rank, with
 * ZC_ERR_ABORTED ("rank R revoked the communicator" or "... failed or
 * aborted the job"), wherever it waits, other threads included, within
 * milliseconds. Not collective and does not block; revoking a revoked
 * communicator is ZC_OK. zc_comm_agree, zc_comm_shrink,
 * zc_comm_failed_ranks and zc_finalize still work on a revoked
 * communicator; no other call does, for good. */
zc_status zc_comm_revoke(zc_comm* comm);
/* *revoked = 1 when operations on comm fail at once: it was revoked, a
 * peer's loss or an abort broke it, or a shrink replaced it; else 0. */
zc_status zc_comm_is_revoked(zc_comm* comm, int* revoked);
/* The ranks of comm this process knows to be lost (its own view, no
 * communication), in increasing order: ranks holds up to zc_size(comm)
 * entries (NULL: only the count), *count their number. After zc_comm_agree
 * or zc_comm_shrink it includes the ranks they agreed failed. */
zc_status zc_comm_failed_ranks(zc_comm* comm, int* ranks, int* count);
/* Fault-tolerant agreement, collective over the live ranks of comm (every
 * live rank must call it, in the same order as its other agreements on
 * comm), also on a revoked communicator. *flag: this rank's value in, the
 * bitwise AND of the values of the ranks that took part out (a rank that
 * died during the call may or may not have contributed). Every rank that
 * returns gets the same *flag and the same status: ZC_OK when no rank of
 * comm was found failed, ZC_ERR_PEER_LOST when some were (zc_last_error
 * names them; zc_comm_failed_ranks then lists them on every survivor).
 * Found failed: known lost by a rank when it called, or dead before its
 * own value reached anyone (a rank that dies later in the call is
 * reported by the next agreement).
 * Correct when ranks die before or during the call. ZC_ERR_TIMEOUT (naming
 * the rank) when a live rank does not take part within ZC_TIMEOUT. */
zc_status zc_comm_agree(zc_comm* comm, int* flag);
/* Collective over the live ranks of comm: revokes comm (as zc_comm_revoke),
 * agrees on which ranks have failed (as zc_comm_agree, repeated until no
 * further failure shows up during it), and gives every survivor *newcomm:
 * the live ranks of comm, in the order of their ranks in comm, renumbered
 * from 0. The new communicator uses the connections and the registered
 * pool the ranks already have (no rendezvous, no new connection); memory
 * from zc_mem_alloc stays valid. comm and every other communicator made
 * before the shrink over the same connections stay revoked for good:
 * finalize them (no barrier, ZC_OK); split or dup the new one instead. One
 * shrink at a time per set of connections; shrinking a communicator that
 * an earlier shrink revoked is ZC_ERR_INVALID_ARG. A rank the others
 * agreed failed (they lost their connections to it) gets ZC_ERR_PEER_LOST
 * and no communicator. A rank that dies during the shrink is left out; one
 * that dies right after it is in the new communicator: its first operation
 * fails, and the survivors shrink again. Errors as zc_comm_agree. */
zc_status zc_comm_shrink(zc_comm* comm, zc_comm** newcomm);

/* ---- persistent plans in stream order (CUDA) ----------------------------- */

/* A persistent allreduce plan (zc_allreduce_plan_init) started in stream
 * order, as the zc_*_on_stream calls: returns at once; the plan's allreduce
 * of sendbuf into recvbuf starts after the work already queued on `stream`
 * (a CUstream / cudaStream_t as void*; NULL: the legacy default stream),
 * and work queued on the stream after the call waits until recvbuf is
 * written. No zc_plan_wait: *req (req may be NULL) completes with the
 * operation's status once its host part is done (a failure also reaches
 * zc_comm_get_async_error, and the stream goes on). Buffers as in
 * zc_plan_start (device or host memory, sendbuf == recvbuf in place; the
 * same buffers may be passed on every start). The host part runs on the
 * communicator's queue, in call order with the nonblocking and
 * stream-ordered collectives, so zc_plan_start and blocking collectives
 * are refused until it is done; zc_plan_free waits for it. Device buffers
 * are staged through pinned memory by copies on the stream (one part: a
 * plan is not pipelined). Where no CUDA stream can exist, only stream NULL
 * is accepted (the plan then runs on the buffers, as a nonblocking call).
 * docs/gpu.md. */
zc_status zc_plan_start_on_stream(zc_plan* plan, const void* sendbuf, void* recvbuf, void* stream,
                                  zc_request** req);

/* ---- Elastic membership: newcomers join a running job (docs/elastic.md) --
 * New processes (a replacement for a lost rank, or extra capacity) join a
 * running job at a point the application chooses. They wait in the job's
 * store (zcrun's, or the store of the communicator's rendezvous: ZC_STORE
 * and ZC_JOB_KEY in their environment, with ZC_JOIN=1); the ranks of a
 * communicator grow it, collectively, into a new communicator of their own
 * ranks and the newcomers, made from a fresh rendezvous in that store (a new
 * membership generation: new connections, new shared-memory segments, its
 * own context ids). The application then broadcasts its state to the
 * newcomers. Each grow admits the newcomers waiting when it starts; a
 * process of an older generation cannot disturb a newer one. */

/* 1 when this process was started to join a running job (by zcrun --elastic, or ZC_JOIN=1 with
 * the store's address in the environment); else 0. */
zc_status zc_is_joiner(int* joining);
/* Non-collective, cheap, no communication with peers beyond the launcher's store: the number of
 * processes waiting to join the job of comm (0 when none or when the launcher is not elastic). Ranks
 * may see different counts at one moment: agree (zc_comm_agree) before growing. */
zc_status zc_comm_join_pending(zc_comm* comm, int* count);
/* Collective over every rank of comm and the newcomers waiting (they call zc_comm_join): every
 * caller gets *newcomm: comm's ranks first, in their order, then the newcomers; comm stays usable
 * until finalized (it is not revoked: it keeps its own connections). Every wait has a deadline
 * (ZC_TIMEOUT); a rank or newcomer dying during it gives a clear status on every other caller
 * (ZC_ERR_PEER_LOST or ZC_ERR_ABORTED naming it), no hang. A communicator without a store (PMIx,
 * a job of one) gives ZC_ERR_UNSUPPORTED. */
zc_status zc_comm_grow(zc_comm* comm, zc_comm** newcomm);
/* In a joiner: waits until the running job grows (zc_comm_grow) and returns the new communicator.
 * ZC_ERR_TIMEOUT when no grow admits it within ZC_TIMEOUT (it then leaves the queue). */
zc_status zc_comm_join(zc_comm** newcomm);

/* ---- Parameter-server failover (docs/ps.md, "Failover") ----
 * Asynchronous mode (zc_ps_options.async = 1) keeps serving when a
 * worker-only rank (ZC_PS_WORKER) is lost: the exception to the rule of
 * zc_ps_push that a lost member fails every rank's push and pull. Each
 * server drops the lost worker when it finds it gone (its process exited
 * or its connections broke; within about 50 ms) and logs a warning
 * naming it. Each piece of the lost worker's pushes (ZC_PS_PARTITION) is
 * applied whole or not at all: the pieces that had arrived whole are
 * applied, nothing after; a push of several pieces may thus be applied in
 * part. The other workers' pushes, pulls and declarations go on (a key
 * declared after the first worker was lost takes its initial value from
 * the first live worker that passes one). zc_ps_free of the survivors
 * then completes without the lost rank (comm itself still holds it: shrink
 * comm to go on with collectives). A lost server (ZC_PS_SERVER or
 * ZC_PS_BOTH) still fails every worker's pending and later operation with
 * ZC_ERR_PEER_LOST naming its rank; in synchronous mode any lost member
 * still does.
 * zc_ps_lost_workers: the ranks of comm of the workers this rank knows
 * lost, in increasing order (a server rank: the workers it dropped; every
 * rank: the workers it finds lost itself): ranks holds up to
 * zc_ps_num_workers(ps) entries (NULL: only the count), *count their
 * number. No communication. */
zc_status zc_ps_lost_workers(zc_ps* ps, int* ranks, int* count);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZCOMM_ZCOMM_H */
