// What a rank does when its launcher dies (zcrun, or mpirun's daemon): the
// World's Device aborts (pending and later calls fail with the cause), the
// rank's shared-memory segments are unlinked, one line names the cause
// ("zcomm rank 1: launcher zcrun (pid 4242) died; exiting"), and the
// process ends (LauncherWatch's SIGTERM, or zcrun's PR_SET_PDEATHSIG).
//
// The SIGTERM that ends it would skip every destructor, so a handler for it
// (installed only where SIGTERM still has its default action) unlinks the
// segments first, says why when the launcher is gone, and dies of SIGTERM
// as before: exit statuses do not change (a SIGTERM while the launcher
// lives ends the rank 100 ms later: the handler first checks the launcher).
// A normal exit without zc_finalize does the same through an exit handler
// (without a signal): mpirun, unlike zcrun, leaves the names in /dev/shm.
#pragma once

#include <memory>

#include "bootstrap/launcher_watch.h"
#include "common/status.h"

namespace zc {
struct World;
namespace api {

// Starts the watch of world's launcher (*out stays null when there is none)
// and installs the SIGTERM handler. Call once world->device exists.
Status WatchLauncher(World* world, std::unique_ptr<LauncherWatch>* out);

}  // namespace api
}  // namespace zc
