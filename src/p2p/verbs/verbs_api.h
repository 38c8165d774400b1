// VerbsApi: the one narrow table of every libibverbs / librdmacm call the
// verbs transport makes. Production code goes through RealVerbsApi(), which
// calls the real libraries; the tests hand the transport an in-process
// emulation of the same table (tests/verbs/verbs_emulation.h), so the
// transport's code runs unchanged against either.
//
// Rules for code that uses the table: never call an ibv_* or rdma_* function
// directly, and read only the object fields the emulation also fills:
//   ibv_device::name; ibv_context::device; ibv_mr::{addr,length,lkey,rkey};
//   ibv_cq::context (cq_context); ibv_comp_channel::fd; ibv_qp::qp_num;
//   ibv_qp_init_attr::cap after create (actual values); ibv_wc fields;
//   rdma_event_channel::fd; rdma_cm_id::{verbs,qp,context};
//   rdma_cm_event::{id,listen_id,event,status,param.conn.private_data(_len)}.
#pragma once

#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

namespace zc {

struct VerbsApi {
  const char* name;  // "libibverbs" or "emulation"

  // ---- devices ----
  ibv_device** (*get_device_list)(int* num_devices);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  int (*query_device)(ibv_context* context, ibv_device_attr* attr);
  int (*query_port)(ibv_context* context, uint8_t port, ibv_port_attr* attr);

  // ---- protection domain and memory ----
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access);
  // nullptr when the library predates dma-buf support.
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access);
  int (*dereg_mr)(ibv_mr* mr);

  // ---- completion queues ----
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context);
  int (*destroy_comp_channel)(ibv_comp_channel* channel);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context,
                       ibv_comp_channel* channel, int comp_vector);
  int (*destroy_cq)(ibv_cq* cq);
  int (*req_notify_cq)(ibv_cq* cq, int solicited_only);      // static inline in verbs.h
  int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context);
  void (*ack_cq_events)(ibv_cq* cq, unsigned int nevents);
  int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc);   // static inline in verbs.h

  // ---- queue pairs ----
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);  // static inline
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);  // static inline
  const char* (*wc_status_str)(ibv_wc_status status);

  // ---- rdma_cm (connection setup: resolves routes / RoCE GIDs from IPs) ----
  rdma_event_channel* (*create_event_channel)();
  void (*destroy_event_channel)(rdma_event_channel* channel);
  int (*create_id)(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps);
  int (*destroy_id)(rdma_cm_id* id);
  int (*bind_addr)(rdma_cm_id* id, sockaddr* addr);
  int (*listen)(rdma_cm_id* id, int backlog);
  uint16_t (*get_src_port)(rdma_cm_id* id);  // network byte order
  int (*resolve_addr)(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int timeout_ms);
  int (*resolve_route)(rdma_cm_id* id, int timeout_ms);
  int (*create_qp)(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr);  // rdma_create_qp
  void (*destroy_qp)(rdma_cm_id* id);                                     // rdma_destroy_qp
  int (*connect)(rdma_cm_id* id, rdma_conn_param* param);
  int (*accept)(rdma_cm_id* id, rdma_conn_param* param);
  int (*reject)(rdma_cm_id* id, const void* private_data, uint8_t private_data_len);
  int (*disconnect)(rdma_cm_id* id);
  int (*get_cm_event)(rdma_event_channel* channel, rdma_cm_event** event);
  int (*ack_cm_event)(rdma_cm_event* event);
  const char* (*event_str)(rdma_cm_event_type event);

  // ---- local addresses (which IP belongs to which RDMA device) ----
  int (*get_ifaddrs)(ifaddrs** list);
  void (*free_ifaddrs)(ifaddrs* list);
};

// The production table: the real libibverbs and librdmacm.
const VerbsApi* RealVerbsApi();

}  // namespace zc
