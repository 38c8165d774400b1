#include "bootstrap/pmix_bootstrap.h"

#include <pmix.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "bootstrap/store_protocol.h"
#include "common/log.h"

namespace zc {

namespace {

// PMIx keys are limited to PMIX_MAX_KEYLEN; ours get a prefix so they never
// collide with the reserved "pmix." namespace.
constexpr const char* kPrefix = "zc.";

int TimeoutSeconds(double s) {
  // PMIx timeouts are whole seconds and 0 means "forever": round up.
  if (!(s > 0)) return 1;
  double c = std::ceil(s);
  return c > 1e8 ? 100000000 : static_cast<int>(c);
}

// Job-level integers come back as various widths depending on the server.
bool ValueToLong(const pmix_value_t* v, long* out) {
  switch (v->type) {
    case PMIX_UINT32: *out = v->data.uint32; return true;
    case PMIX_UINT16: *out = v->data.uint16; return true;
    case PMIX_UINT8: *out = v->data.uint8; return true;
    case PMIX_UINT64: *out = static_cast<long>(v->data.uint64); return true;
    case PMIX_INT: *out = v->data.integer; return true;
    case PMIX_INT32: *out = v->data.int32; return true;
    case PMIX_INT16: *out = v->data.int16; return true;
    case PMIX_INT64: *out = static_cast<long>(v->data.int64); return true;
    case PMIX_UINT: *out = static_cast<long>(v->data.uint); return true;
    case PMIX_SIZE: *out = static_cast<long>(v->data.size); return true;
    case PMIX_PROC_RANK: *out = static_cast<long>(v->data.rank); return true;
    default: return false;
  }
}

zc_status MapPmixStatus(pmix_status_t rc) {
  if (rc == PMIX_ERR_TIMEOUT) return ZC_ERR_TIMEOUT;
  if (rc == PMIX_ERR_NOT_FOUND) return ZC_ERR_TIMEOUT;
  if (rc == PMIX_ERR_UNREACH || rc == PMIX_ERR_LOST_CONNECTION)
    return ZC_ERR_PEER_LOST;
  if (rc == PMIX_ERR_BAD_PARAM) return ZC_ERR_INVALID_ARG;
  return ZC_ERR_SYSTEM;
}

Status PmixError(pmix_status_t rc, const std::string& what) {
  return Error(MapPmixStatus(rc), "%s: %s", what.c_str(),
               PMIx_Error_string(rc));
}

}  // namespace

struct PmixBootstrap::State {
  pmix_proc_t me;
  bool initialized = false;
};

Status PmixBootstrap::Create(const Config& config,
                             std::unique_ptr<Bootstrap>* out,
                             const std::string& key_prefix) {
  (void)config;
  std::unique_ptr<PmixBootstrap> b(new PmixBootstrap());
  b->key_prefix_ = key_prefix;
  b->st_ = std::make_unique<State>();
  PMIX_PROC_CONSTRUCT(&b->st_->me);
  pmix_status_t rc = PMIx_Init(&b->st_->me, nullptr, 0);
  if (rc != PMIX_SUCCESS)
    return PmixError(rc, "pmix bootstrap: PMIx_Init (is this process started "
                         "by a PMIx launcher such as mpirun or srun?)");
  b->st_->initialized = true;
  b->parent_ = getppid();
  b->rank_ = static_cast<int>(b->st_->me.rank);
  b->host_id_ = LocalHostId();

  pmix_proc_t job;
  PMIX_PROC_CONSTRUCT(&job);
  PMIX_LOAD_PROCID(&job, b->st_->me.nspace, PMIX_RANK_WILDCARD);
  auto get_long = [&](const pmix_proc_t* who, const char* key, long* v) {
    pmix_value_t* val = nullptr;
    pmix_status_t r = PMIx_Get(who, key, nullptr, 0, &val);
    if (r != PMIX_SUCCESS)
      return PmixError(r, Format("rank %d: pmix bootstrap: PMIx_Get(%s)",
                                 b->rank_, key));
    bool ok = ValueToLong(val, v);
    int type = val->type;
    PMIX_VALUE_RELEASE(val);
    if (!ok)
      return Error(ZC_ERR_SYSTEM, "rank %d: pmix bootstrap: %s has "
                   "unexpected type %d", b->rank_, key, type);
    return Status::Ok();
  };
  long size = 0, lrank = 0, lsize = 0;
  ZC_RETURN_IF_ERROR(get_long(&job, PMIX_JOB_SIZE, &size));
  ZC_RETURN_IF_ERROR(get_long(&b->st_->me, PMIX_LOCAL_RANK, &lrank));
  ZC_RETURN_IF_ERROR(get_long(&job, PMIX_LOCAL_SIZE, &lsize));
  if (size < 1 || b->rank_ >= size || lrank < 0 || lrank >= lsize)
    return Error(ZC_ERR_SYSTEM, "pmix bootstrap: inconsistent job: rank %d, "
                 "size %ld, local rank %ld, local size %ld", b->rank_, size,
                 lrank, lsize);
  b->size_ = static_cast<int>(size);
  b->local_rank_ = static_cast<int>(lrank);
  b->local_size_ = static_cast<int>(lsize);
  ZC_INFO(kBootstrap, "rank %d of %d (local %d of %d) via PMIx namespace %s",
          b->rank_, b->size_, b->local_rank_, b->local_size_,
          b->st_->me.nspace);
  *out = std::move(b);
  return Status::Ok();
}

LauncherInfo PmixBootstrap::Launcher() {
  LauncherInfo info;
  if (parent_ <= 1) return info;  // already orphaned, or started by init
  info.pid = parent_;
  info.name = "launcher";
  if (FILE* f = fopen(Format("/proc/%d/comm", static_cast<int>(parent_)).c_str(), "re")) {
    char comm[64] = {};
    if (fgets(comm, sizeof(comm), f)) {
      comm[strcspn(comm, "\n")] = 0;
      if (comm[0]) info.name = comm;
    }
    fclose(f);
  }
  return info;
}

PmixBootstrap::~PmixBootstrap() {
  if (st_ && st_->initialized) {
    pmix_status_t rc = PMIx_Finalize(nullptr, 0);
    if (rc != PMIX_SUCCESS)
      ZC_WARN(kBootstrap, "rank %d: PMIx_Finalize: %s", rank_,
              PMIx_Error_string(rc));
  }
}

Status PmixBootstrap::Put(const std::string& key, const std::string& value) {
  std::string k = kPrefix + key_prefix_ + key;
  std::string ctx = Format("rank %d: pmix bootstrap put %s", rank_,
                           store::QuoteKey(key).c_str());
  if (k.size() > PMIX_MAX_KEYLEN)
    return Error(ZC_ERR_INVALID_ARG, "%s: key longer than %d bytes",
                 ctx.c_str(), PMIX_MAX_KEYLEN - 3);
  if (k.find('\0') != std::string::npos)
    return Error(ZC_ERR_INVALID_ARG, "%s: PMIx keys cannot hold NUL bytes",
                 ctx.c_str());
  // A byte object keeps binary values intact; PMIx_Put copies it.
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_BYTE_OBJECT;
  v.data.bo.bytes = const_cast<char*>(value.data());
  v.data.bo.size = value.size();
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, k.c_str(), &v);
  if (rc != PMIX_SUCCESS) return PmixError(rc, ctx + ": PMIx_Put");
  rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) return PmixError(rc, ctx + ": PMIx_Commit");
  return Status::Ok();
}

Status PmixBootstrap::Fence(double timeout_s) {
  ++fences_;
  pmix_info_t info[2];
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  bool collect = true;
  int tmo = TimeoutSeconds(timeout_s);
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
  // No procs = every process of our namespace.
  pmix_status_t rc = PMIx_Fence(nullptr, 0, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS)
    return PmixError(rc, Format("rank %d: pmix bootstrap fence #%llu "
                                "(timeout %d s)", rank_,
                                static_cast<unsigned long long>(fences_), tmo));
  return Status::Ok();
}

Status PmixBootstrap::Get(int rank, const std::string& key, std::string* value,
                          double timeout_s) {
  std::string ctx = Format("rank %d: pmix bootstrap get %s from rank %d",
                           rank_, store::QuoteKey(key).c_str(), rank);
  if (rank < 0 || rank >= size_)
    return Error(ZC_ERR_INVALID_ARG, "%s: rank out of range [0, %d)",
                 ctx.c_str(), size_);
  std::string k = kPrefix + key_prefix_ + key;
  if (k.size() > PMIX_MAX_KEYLEN)
    return Error(ZC_ERR_INVALID_ARG, "%s: key too long", ctx.c_str());
  pmix_proc_t proc;
  PMIX_PROC_CONSTRUCT(&proc);
  PMIX_LOAD_PROCID(&proc, st_->me.nspace, static_cast<pmix_rank_t>(rank));
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  int tmo = TimeoutSeconds(timeout_s);
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &tmo, PMIX_INT);
  pmix_value_t* val = nullptr;
  pmix_status_t rc = PMIx_Get(&proc, k.c_str(), &info, 1, &val);
  PMIX_INFO_DESTRUCT(&info);
  if (rc != PMIX_SUCCESS) return PmixError(rc, ctx + ": PMIx_Get");
  Status st;
  if (val->type == PMIX_BYTE_OBJECT) {
    value->assign(val->data.bo.bytes ? val->data.bo.bytes : "",
                  val->data.bo.size);
  } else if (val->type == PMIX_STRING) {
    value->assign(val->data.string ? val->data.string : "");
  } else {
    st = Error(ZC_ERR_SYSTEM, "%s: unexpected PMIx value type %d", ctx.c_str(),
               val->type);
  }
  PMIX_VALUE_RELEASE(val);
  return st;
}

}  // namespace zc
