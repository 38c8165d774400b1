// SIGUSR2 -> flight recorder dumps. A process whose communicators have a
// dump folder (ZC_TRACE_DIR) writes every such communicator's dump when it
// receives SIGUSR2: the handler only writes one byte into a pipe (which is
// async-signal-safe); a thread of its own, blocked on the pipe, writes the
// dumps. The handler is installed only where SIGUSR2 still has its default
// action, so a program's own SIGUSR2 handler is left alone. Process-wide
// state (docs/concepts.md, "Process-wide state").
#pragma once

namespace zc::trace {

class FlightRecorder;

// The recorder is dumped on SIGUSR2 until it is unregistered. The first
// registration installs the handler and starts the thread.
void RegisterForSignal(FlightRecorder* recorder);
// Waits for a dump of this recorder in progress to finish.
void UnregisterForSignal(FlightRecorder* recorder);
// Whether SIGUSR2 reaches the dumping thread (false where the program had
// its own handler, or the pipe or thread could not be made).
bool SignalDumpsArmed();

}  // namespace zc::trace
