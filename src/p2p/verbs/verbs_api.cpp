// RealVerbsApi(): the production VerbsApi table. Functions that the headers
// define static inline (ibv_post_send, ibv_poll_cq, ...) are wrapped in real
// functions here so that they can live in the table.
#include "p2p/verbs/verbs_api.h"

namespace zc {
namespace {

int PollCq(ibv_cq* cq, int n, ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); }
int ReqNotifyCq(ibv_cq* cq, int solicited_only) { return ibv_req_notify_cq(cq, solicited_only); }
int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return ibv_post_send(qp, wr, bad); }
int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(qp, wr, bad); }
int QueryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  return ibv_query_port(ctx, port, attr);
}
ibv_mr* RegMr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr(pd, addr, length, access);
}
const char* DeviceName(ibv_device* d) { return ibv_get_device_name(d); }
uint16_t SrcPort(rdma_cm_id* id) { return rdma_get_src_port(id); }
int GetIfaddrs(ifaddrs** list) { return getifaddrs(list); }
void FreeIfaddrs(ifaddrs* list) { freeifaddrs(list); }

const VerbsApi kReal = {
    "libibverbs",
    ibv_get_device_list,
    ibv_free_device_list,
    DeviceName,
    ibv_open_device,
    ibv_close_device,
    ibv_query_device,
    QueryPort,
    ibv_alloc_pd,
    ibv_dealloc_pd,
    RegMr,
    ibv_reg_dmabuf_mr,
    ibv_dereg_mr,
    ibv_create_comp_channel,
    ibv_destroy_comp_channel,
    ibv_create_cq,
    ibv_destroy_cq,
    ReqNotifyCq,
    ibv_get_cq_event,
    ibv_ack_cq_events,
    PollCq,
    ibv_modify_qp,
    PostSend,
    PostRecv,
    ibv_wc_status_str,
    rdma_create_event_channel,
    rdma_destroy_event_channel,
    rdma_create_id,
    rdma_destroy_id,
    rdma_bind_addr,
    rdma_listen,
    SrcPort,
    rdma_resolve_addr,
    rdma_resolve_route,
    rdma_create_qp,
    rdma_destroy_qp,
    rdma_connect,
    rdma_accept,
    rdma_reject,
    rdma_disconnect,
    rdma_get_cm_event,
    rdma_ack_cm_event,
    rdma_event_str,
    GetIfaddrs,
    FreeIfaddrs,
};

}  // namespace

const VerbsApi* RealVerbsApi() { return &kReal; }

}  // namespace zc
