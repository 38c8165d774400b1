// The transport registry: every backend is one TransportEntry of the same
// shape (after TensorPipe's transport context -- viable, domain descriptor,
// can-reach -- and NCCL's transport table), listed in one table
// (transport_registry.cpp). The Device never names a backend: it publishes
// each entry's viability and domain descriptor (PeerInfo), lets
// PlanTransports pick one entry per pair of ranks, and creates the chosen
// ones through their factory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "p2p/peer_info.h"
#include "p2p/transport.h"

namespace zc {

// What an entry may look at to say what reaches this rank.
struct DomainContext {
  const Config* config = nullptr;
  std::string host_id;  // the bootstrap's host id
};

struct TransportEntry {
  TransportKind kind;
  const char* name;  // ZC_TRANSPORT value, log and error name
  // Lower first: under ZC_TRANSPORT=auto a pair uses the first entry, in
  // priority order, that both ranks find viable and that can reach.
  int priority;
  // Usable in this process? false with *why (verbs: no device, port down).
  bool (*viable)(const Config& config, std::string* why);
  // What this rank can be reached by (exchanged at setup).
  std::string (*domain)(const DomainContext& ctx);
  // Can a rank of domain `mine` reach one of domain `peer` (both viable)?
  bool (*can_reach)(const std::string& mine, const std::string& peer);
  // Error texts when ZC_TRANSPORT forces this entry: "rank %d <not_viable>:
  // <why>" and "ranks %d and %d <unreachable>".
  const char* not_viable;
  const char* unreachable;
  // Who wants to know why an unviable entry was passed over (INFO line).
  const char* label;
  Status (*create)(TransportHost* host, const TransportSetup& setup, std::unique_ptr<Transport>* out);
};

// Every backend this build knows, in table order (shm, tcp, verbs).
const std::vector<const TransportEntry*>& TransportTable();
// nullptr when there is no entry of that name or kind.
const TransportEntry* FindTransport(const std::string& name);
const TransportEntry* FindTransport(TransportKind kind);

// This rank's viability and domain for every entry, as published in
// PeerInfo::reach. An entry is probed only under ZC_TRANSPORT=auto or when
// forced (probing verbs opens devices); others read "not probed".
std::vector<PeerInfo::Reach> ProbeTransports(const Config& config, const DomainContext& ctx);

struct TransportPlan {
  std::vector<const TransportEntry*> per_peer;  // by rank; nullptr for self
  std::vector<bool> same_host;                  // by rank: host ids match
  // Entries some pair of the job uses, in kind order: every rank creates
  // and connects the same set.
  std::vector<const TransportEntry*> used;
};

// The transport of every pair, computed identically on every rank from the
// records of all ranks (`forced`: ZC_TRANSPORT). A forced entry that some
// pair cannot use fails on every rank with the same rank and cause, before
// anything connects.
Status PlanTransports(const std::string& forced, int rank, const std::vector<PeerInfo>& all,
                      TransportPlan* out);

}  // namespace zc
