#include "p2p/region_hold.h"

#include "p2p/transport.h"

namespace zc {

RegionHold& RegionHold::operator=(RegionHold&& o) noexcept {
  if (this != &o) {
    reset();
    host_ = o.host_;
    region_ = o.region_;
    id_ = o.id_;
    o.host_ = nullptr;
    o.region_ = nullptr;
    o.id_ = 0;
  }
  return *this;
}

void RegionHold::reset() {
  if (host_ && id_) host_->ReleaseRegion(id_);
  host_ = nullptr;
  region_ = nullptr;
  id_ = 0;
}

}  // namespace zc
