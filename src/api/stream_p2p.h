// StreamP2p: a communicator's send/recv in stream order (zc_send_on_stream,
// zc_recv_on_stream), progressed by a thread of its own.
//
// Point-to-point operations do not go through the queue of nonblocking
// collectives: that queue runs one task at a time, and a receive waiting
// there for its message would hold back the collectives (and sends) its
// peer's message depends on. Here every operation progresses on its own:
//  - a receive is posted at the call (the messenger matches receives in
//    posting order) into its pinned copy; when it completes, its gate opens
//    and the stream copies the message to the device;
//  - a send is posted once its stream has passed the copy of its input
//    (sends in call order: a send whose stream is not there yet holds back
//    the sends after it, so messages of one sender and tag stay in order);
//    it has no gate (its input was copied).
// The thread polls events and the messenger's requests; it makes no CUDA
// call that waits for the device.
#pragma once

#include <zcomm/zcomm.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/deadline.h"
#include "common/status.h"

namespace zc {
class Messenger;
class P2pRequest;
namespace gpu {
class StreamOrdered;
struct StreamOp;
}  // namespace gpu
}  // namespace zc

namespace zc::api {

class StreamP2p {
 public:
  StreamP2p(Messenger* p2p, double timeout_s);
  ~StreamP2p();  // Stop()
  StreamP2p(const StreamP2p&) = delete;
  StreamP2p& operator=(const StreamP2p&) = delete;

  // req (may be null) completes with the operation; context names it in
  // errors ("rank R: send_on_stream to P (tag T, N bytes)"). so and op are
  // null where the process has no CUDA (stream NULL: nothing to wait for).
  void AddSend(gpu::StreamOrdered* so, std::shared_ptr<gpu::StreamOp> op, const void* host, size_t bytes, int peer,
               int tag, zc_request* req, std::string context);
  void AddRecv(gpu::StreamOrdered* so, std::shared_ptr<gpu::StreamOp> op, std::shared_ptr<P2pRequest> posted,
               zc_request* req, std::string context);
  // Lets the operations finish (each within the messenger's deadlines),
  // then ends the thread.
  void Stop();

  // One operation, in call order (public for the error explanation in
  // stream_p2p.cpp). A receive has `posted` from the start.
  struct Entry {
    bool send = false;
    gpu::StreamOrdered* so = nullptr;
    std::shared_ptr<gpu::StreamOp> op;
    std::shared_ptr<P2pRequest> posted;  // null: a send not posted yet
    const void* host = nullptr;
    size_t bytes = 0;
    int peer = 0, tag = 0;
    zc_request* req = nullptr;
    std::string context;
    Deadline ready_deadline{0};
  };

 private:
  void Run();
  // One pass over the entries; true when one of them moved.
  bool Progress(std::deque<Entry>* active);
  void ReleaseSendsBehind(std::deque<Entry>* active, std::deque<Entry>::iterator recv);
  void Finish(Entry* e, Status st);

  Messenger* p2p_;
  double timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> incoming_;  // mu_
  bool stop_ = false;           // mu_
  std::thread thread_;
};

// zc_finalize: lets the communicator's stream send/recv finish and ends
// their thread (stream_c.cpp).
void StopStreamP2p(zc_comm* comm);

}  // namespace zc::api
