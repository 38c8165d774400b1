#include "p2p/region_hold.h"

namespace zc {

RegionHold& RegionHold::operator=(RegionHold&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = o.owner_;
    region_ = o.region_;
    id_ = o.id_;
    o.owner_ = nullptr;
    o.region_ = nullptr;
    o.id_ = 0;
  }
  return *this;
}

void RegionHold::reset() {
  if (owner_ && id_) owner_->Release(id_);
  owner_ = nullptr;
  region_ = nullptr;
  id_ = 0;
}

}  // namespace zc
