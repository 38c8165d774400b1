// Worker: the worker half of a zc_ps. Declaring a key sends every server
// the key and the descriptors of this worker's reply slots and push credits
// (registered memory, allocated here once per key and server), and receives
// the descriptors of its push slots on the servers. From then on a push is,
// per chunk, one one-sided write of the chunk into its slot on its server
// plus the flag; a pull waits for the server's reply in the reply slot
// (synchronous mode: the server writes it as soon as the round is complete;
// asynchronous: after a one-word request) and copies it out.
//
// Order rules are checked by Admit*() in the calling thread, before any
// transfer, so that a bad call fails at once on the calling rank.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "ps/chunk_slots.h"
#include "ps/protocol.h"
#include "ps/shared.h"

namespace zc::ps {

class Worker {
 public:
  struct Key;
  explicit Worker(Shared* shared);
  ~Worker();  // frees every region

  Status Declare(uint64_t key, size_t count, zc_dtype dtype, const void* init);
  // Checks the order rules and advances the key's state; *k and *round are
  // what DoPush / DoPull need.
  Status AdmitPush(uint64_t key, Key** k, uint64_t* round);
  Status AdmitPull(uint64_t key, Key** k, uint64_t* round);
  Status DoPush(Key* k, const void* buf, uint64_t round);
  Status DoPull(Key* k, void* buf, uint64_t round);
  // Waits until the servers have taken every push, then says goodbye.
  Status Bye();
  size_t bytes_of(const Key* k) const;
  // The bytes of a declared key's tensor (ZC_ERR_INVALID_ARG if undeclared).
  Status KeyBytes(uint64_t key, size_t* bytes) const;

  struct PerServer {
    bool used = false;
    ChunkSlotLayout layout;
    MemRegion* reply_slots = nullptr;   // servers write replies here
    MemRegion* push_credits = nullptr;  // servers return push slots here
    ChunkSlotWriter push;
    ChunkSlotReader reply;
  };
  struct Key {
    uint64_t key = 0, count = 0;
    zc_dtype dtype = ZC_FLOAT32;
    size_t es = 0;
    std::vector<ChunkPlace> chunks;
    std::vector<PerServer> s;  // by server index
    // Order state (calling thread): rounds admitted, and whether this
    // round's push has been admitted (synchronous mode).
    uint64_t pushes = 0, pulls = 0;
    bool pushed = false;
  };

 private:
  // Declare's steps: the key cut into chunks over the servers; the slots
  // the servers reply into; the declaration sent to every server; every
  // server's answer (a refusal in *verdict); the first worker's initial
  // value written into every chunk.
  std::unique_ptr<Key> CutKey(uint64_t key, size_t count, zc_dtype dtype) const;
  Status AllocateReplySlots(Key* k);
  Status Announce(const Key& k, bool has_init, const Deadline& dl);
  Status AwaitAnswer(int server, uint64_t key, const Deadline& dl, std::string* msg);
  Status AwaitAnswers(Key* k, const Deadline& dl, Status* verdict);
  Status SendInitialValue(Key& k, const void* init, const Deadline& dl);
  // Waits until *word >= value, failing with a server's alert, a lost
  // member or the deadline.
  Status Wait(const std::atomic<uint64_t>* word, uint64_t value, int server, const char* what,
              const Deadline& dl);
  Status Alert() const;
  void FreeKey(Key* k);

  Shared* sh_;
  std::map<uint64_t, std::unique_ptr<Key>> keys_;
  uint64_t declarations_ = 0;
  uint64_t chunks_before_ = 0;
  Status broken_;  // a failed declaration leaves servers out of step
};

}  // namespace zc::ps
