#include "p2p/device.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "common/auth.h"
#include "common/log.h"
#include "p2p/control_plane.h"
#include "p2p/peer_info.h"
#include "p2p/recv_post.h"
#include "p2p/segment.h"
#include "p2p/transport_registry.h"

namespace zc {
namespace {

// A job key from the kernel's CSPRNG; there is no weaker fallback: a
// predictable key would let anyone who can reach the ports join the job.
Status HexKey(size_t bytes, std::string* out) {
  std::string raw(bytes, '\0');
  ZC_RETURN_IF_ERROR(net::RandomBytes(raw.data(), bytes).with_context("making the job key"));
  static const char* hex = "0123456789abcdef";
  out->clear();
  for (unsigned char c : raw) {
    *out += hex[c >> 4];
    *out += hex[c & 15];
  }
  return Status::Ok();
}

}  // namespace

Status Device::Create(Bootstrap* bootstrap, const Config& config, std::unique_ptr<Device>* out) {
  auto dev = std::unique_ptr<Device>(new Device());
  ZC_RETURN_IF_ERROR(dev->Init(bootstrap, config));
  *out = std::move(dev);
  return Status::Ok();
}

Status Device::AllGather(const std::string& key, const std::string& mine,
                         std::vector<std::string>* all) {
  std::lock_guard<std::mutex> lock(allgather_mu_);
  // Keys are made unique per call so repeated exchanges never read stale values.
  std::string k = Format("%s.%d", key.c_str(), allgather_seq_++);
  return bootstrap_->AllGather(k, mine, all, config_.timeout_s);
}

// Setup, in order; each step is collective where it exchanges records.
Status Device::Init(Bootstrap* bootstrap, const Config& config) {
  config_ = config;
  bootstrap_ = bootstrap;
  rank_ = bootstrap->rank();
  size_ = bootstrap->size();
  // First: transports report lost peers from the moment they exist.
  health_ = std::make_unique<PeerHealth>(rank_, size_, config_.timeout_s);
  std::vector<PeerInfo> all;
  ZC_RETURN_IF_ERROR(ExchangePeerInfo(bootstrap->host_id(), &all));
  TransportPlan plan;
  ZC_RETURN_IF_ERROR(ChooseTransports(all, &plan));
  ZC_RETURN_IF_ERROR(CreateTransports(plan));
  CreateRegions();
  ZC_RETURN_IF_ERROR(ConnectTransports(plan, all));
  CreateChannels();
  ZC_RETURN_IF_ERROR(CreateControlPlane());
  ZC_INFO(kP2p, "device ready: %d ranks, %s", size_, [&] {
    std::string s;
    for (auto& [k, t] : transports_) s += std::string(s.empty() ? "" : "+") + TransportName(k);
    return s.empty() ? std::string("no peers") : s;
  }().c_str());
  return Status::Ok();
}

Status Device::ExchangePeerInfo(const std::string& host_id, std::vector<PeerInfo>* all) {
  // Each rank publishes, for every transport, whether it is viable here and
  // why not, so that every rank's error names the cause: zcrun may kill the
  // rank that found it before it prints.
  PeerInfo me;
  me.host = host_id;
  me.pid = static_cast<int>(getpid());
  DomainContext ctx;
  ctx.config = &config_;
  ctx.host_id = host_id;
  me.reach = ProbeTransports(config_, ctx);
  // The job key authenticates data connections; zcrun provides one, under
  // PMIx rank 0 makes one.
  if (rank_ == 0 && config_.job_key.empty())
    ZC_RETURN_IF_ERROR(HexKey(32, &me.key).with_context(Format("rank %d", rank_)));
  std::vector<std::string> records;
  ZC_RETURN_IF_ERROR(AllGather("zc.peers", me.Serialize(), &records));
  all->assign(size_, PeerInfo());
  peer_pid_.assign(size_, 0);
  for (int r = 0; r < size_; ++r) {
    Status st = PeerInfo::Parse(records[r], &(*all)[r]);
    if (!st.ok())
      return Error(ZC_ERR_INTERNAL, "rank %d: bootstrap: malformed peer record from rank %d: %s", rank_, r,
                   st.message().c_str());
    peer_pid_[r] = (*all)[r].pid;
  }
  job_key_ = config_.job_key.empty() ? (*all)[0].key : config_.job_key;
  job_tag_ = job_key_.substr(0, 16);
  for (char& ch : job_tag_)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = 'x';
  // "<tag>-g<n>": the job's prefix still matches (zcrun's clean-up), a
  // rank's ("<tag>-<rank>-") does not (the sweep of an older generation's
  // lost ranks).
  if (config_.generation > 0) job_tag_ += Format("-g%d", config_.generation);
  return Status::Ok();
}

Status Device::ChooseTransports(const std::vector<PeerInfo>& all, TransportPlan* plan) {
  ZC_RETURN_IF_ERROR(PlanTransports(config_.transport, rank_, all, plan));
  local_ = plan->same_host;
  NumberHosts(all);
  std::vector<TransportKind> kinds(size_, TransportKind::kNone);
  for (int p = 0; p < size_; ++p)
    if (plan->per_peer[p]) kinds[p] = plan->per_peer[p]->kind;
  channels_ = std::make_unique<ChannelTable>(std::move(kinds));
  // A dead process on this host has no connection to break: health looks
  // at the process itself.
  std::vector<int> local_pids(size_, 0);
  for (int p = 0; p < size_; ++p)
    if (local_[p]) local_pids[p] = peer_pid_[p];
  health_->WatchProcesses(std::move(local_pids));
  NoteOversubscription();
  // Under auto, say once why a better transport was passed over.
  if (config_.transport != "auto") return Status::Ok();
  const PeerInfo& mine = all[rank_];
  for (const TransportEntry* e : TransportTable()) {
    const PeerInfo::Reach* r = mine.Find(e->name);
    if (!r || r->viable) continue;
    for (int p = 0; p < size_; ++p) {
      if (plan->per_peer[p] && plan->per_peer[p]->priority > e->priority) {
        ZC_INFO(kP2p, "%s not viable (%s): using %s to other hosts", e->label, r->why.c_str(),
                plan->per_peer[p]->name);
        break;
      }
    }
  }
  return Status::Ok();
}

void Device::NumberHosts(const std::vector<PeerInfo>& all) {
  // The index of each rank's host id's first appearance in rank order (the
  // same on every rank).
  host_index_.assign(size_, 0);
  std::vector<std::string> seen;
  for (int r = 0; r < size_; ++r) {
    auto it = std::find(seen.begin(), seen.end(), all[r].host);
    host_index_[r] = static_cast<int>(it - seen.begin());
    if (it == seen.end()) seen.push_back(all[r].host);
  }
}

void Device::NoteOversubscription() {
  // More ranks on this host than cores we may run on: spinning only keeps
  // the rank that would set our flag off the core, so waits yield at once.
  int local = 1;
  for (int p = 0; p < size_; ++p) local += (p != rank_ && local_[p]) ? 1 : 0;
  // The host's online CPUs, not this process's affinity: a launcher that
  // binds each rank to one core must not make every rank look crowded.
  int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  oversubscribed_ = local > cores;
  if (oversubscribed_) {
    health_->SetOversubscribed(true);
    ZC_INFO(kP2p, "%d ranks on this host share %d cores: waits yield without spinning", local, cores);
  }
}

Status Device::CreateTransports(const TransportPlan& plan) {
  bool any_remote = false;
  for (int p = 0; p < size_; ++p) any_remote |= p != rank_ && !local_[p];
  if (rank_ == 0 || !any_remote) Segment::SweepStale();
  TransportSetup setup;
  setup.rank = rank_;
  setup.size = size_;
  setup.config = config_;
  setup.job_key = job_key_;
  setup.oversubscribed = oversubscribed_;
  // Every rank creates every transport some pair of the job uses.
  for (const TransportEntry* e : plan.used) {
    std::unique_ptr<Transport> t;
    ZC_RETURN_IF_ERROR(e->create(this, setup, &t));
    transports_[e->kind] = std::move(t);
  }
  return Status::Ok();
}

void Device::CreateRegions() {
  // Every region is exposed to every transport, in kind order.
  std::vector<Transport*> all;
  for (auto& [k, t] : transports_) all.push_back(t.get());
  regions_ = std::make_unique<LocalRegions>(rank_, config_, job_tag_, std::move(all));
  posts_ = std::make_unique<PostBook>(regions_.get());
}

Status Device::ConnectTransports(const TransportPlan& plan, const std::vector<PeerInfo>& all) {
  // Every transport listens, then one exchange of every rank's addresses
  // (collective even when a listen failed, so peers do not wait for us
  // until the deadline), then each connects in kind order.
  std::map<TransportKind, LinkPlan> links;
  PeerAddresses mine;
  Status listen_st;
  for (auto& [k, t] : transports_) {
    const TransportEntry* e = FindTransport(k);
    LinkPlan& link = links[k];
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && plan.per_peer[p] == e) link.peers.push_back(p);
    link.domains.resize(size_);
    for (int r = 0; r < size_; ++r) {
      const PeerInfo::Reach* reach = all[r].Find(e->name);
      if (reach && reach->viable) link.domains[r] = reach->domain;
    }
    link.my_domain = link.domains[rank_];
    std::string address;
    Status st = t->Listen(link, &address);
    if (!st.ok() && listen_st.ok())
      listen_st = st.with_context(Format("rank %d: connecting %s", rank_, e->name));
    mine.entries.push_back({e->name, st.ok() ? address : std::string()});
  }
  std::vector<std::string> records;
  Status ag = AllGather("zc.connect", mine.Serialize(), &records);
  ZC_RETURN_IF_ERROR(listen_st);
  ZC_RETURN_IF_ERROR(ag);
  std::vector<PeerAddresses> addrs(size_);
  for (int r = 0; r < size_; ++r) {
    Status st = PeerAddresses::Parse(records[r], &addrs[r]);
    if (!st.ok())
      return Error(ZC_ERR_INTERNAL, "rank %d: bootstrap: malformed address record from rank %d: %s", rank_,
                   r, st.message().c_str());
  }
  for (auto& [k, t] : transports_) {
    std::vector<std::string> theirs(size_);
    for (int r = 0; r < size_; ++r) theirs[r] = addrs[r].Find(TransportName(k));
    ZC_RETURN_IF_ERROR(t->Connect(theirs).with_context(Format("rank %d: connecting %s", rank_, TransportName(k))));
  }
  return Status::Ok();
}

void Device::CreateChannels() {
  std::vector<bool> notified(size_);
  std::vector<WaitDriver*> drivers(size_, nullptr);
  for (int p = 0; p < size_; ++p) {
    // What a tcp or verbs peer writes is stored by our progress thread,
    // which notifies; a shm peer stores it itself.
    notified[p] = transport_to(p) != TransportKind::kShm;
    if (p == rank_) continue;
    Transport* t = transports_[transport_to(p)].get();
    drivers[p] = t->wait_driver();
    std::vector<std::unique_ptr<Channel>> v;
    for (int i = 0; i < t->connections_per_peer(); ++i)
      v.push_back(std::make_unique<Channel>(health_.get(), t->connection(p, i), p, transport_to(p)));
    channels_->Add(p, std::move(v));
  }
  health_->SetWaits(std::move(notified), std::move(drivers));
}

Status Device::CreateControlPlane() {
  ZC_RETURN_IF_ERROR(ControlPlane::Create(
      channels_.get(), health_.get(), regions_.get(),
      [this](const std::string& key, const std::string& mine, std::vector<std::string>* all) {
        return AllGather(key, mine, all);
      },
      &control_));
  // Alerts go on connection 0 itself, not a Channel: a Channel refuses to
  // write once this rank has aborted, which is when alerts are sent.
  std::vector<PeerHealth::AlertTarget> targets(size_);
  for (int p = 0; p < size_; ++p) {
    Transport* t = p == rank_ ? nullptr : transport(transport_to(p));
    if (t) targets[p] = {t->connection(p, 0), control_->peer_alert(p)};
  }
  health_->AttachAlerts(control_->alert_word(), std::move(targets));
  // A peer on this host: its CPU word through this process's mapping of its
  // alert region (null where the transport has no load/store address).
  std::vector<const std::atomic<uint64_t>*> cpu_words(size_, nullptr);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    char* base = channel(p, 0).DirectAddress(control_->peer_alert(p));
    if (base)
      cpu_words[p] = reinterpret_cast<const std::atomic<uint64_t>*>(base + ControlPlane::kCpuWordOffset);
  }
  health_->AttachCpuWords(control_->cpu_word(), std::move(cpu_words));
  return Status::Ok();
}

Device::~Device() {
  if (!health_) return;
  health_->Farewell();
  for (auto& [k, t] : transports_) t->Shutdown();
  health_->DetachAlerts();
  control_.reset();
  posts_.reset();
  regions_.reset();
  channels_.reset();
  transports_.clear();
}

Transport* Device::transport(TransportKind k) {
  auto it = transports_.find(k);
  return it == transports_.end() ? nullptr : it->second.get();
}

void Device::ServeOffers(int peer) {
  if (Transport* t = transport(transport_to(peer))) t->ServeOffers(peer);
}

Status Device::SendControl(int peer, uint64_t tag, const std::string& msg, const Deadline& dl) {
  return control_->Send(peer, tag, msg.data(), msg.size(), dl);
}

Status Device::RecvControl(int peer, uint64_t tag, std::string* msg, const Deadline& dl) {
  return control_->Recv(peer, tag, msg, dl);
}

}  // namespace zc
