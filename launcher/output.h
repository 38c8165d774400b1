// Output forwarding: a rank's stdout or stderr pipe is cut into whole lines
// that are written to zcrun's own stdout or stderr with one write() each,
// prefixed "[rank] ", so lines of different ranks never interleave.
#pragma once

#include <cstddef>
#include <string>

namespace zc::launcher {

class LineForwarder {
 public:
  // A line longer than this is written in pieces of this size (each a line).
  static constexpr size_t kMaxLine = 1 << 20;

  LineForwarder(int out_fd, std::string prefix, bool tag)
      : out_fd_(out_fd), prefix_(std::move(prefix)), tag_(tag) {}

  // Reads what `in_fd` has (non-blocking) and forwards complete lines.
  // Returns false at end of file or on a read error (the pipe is done).
  bool ReadFrom(int in_fd);
  // Forwards complete lines of `data`, keeps the incomplete tail.
  void Feed(const char* data, size_t n);
  // At end of file: writes a final line that had no newline. With tags a
  // newline is added so the next rank's line starts on its own line.
  void Flush();

  // Bytes written out and lines written (tests).
  size_t lines_written() const { return lines_; }

 private:
  void Emit(const char* data, size_t n, bool add_newline);

  int out_fd_;
  std::string prefix_;
  bool tag_;
  std::string pending_;
  std::string line_;   // reused output buffer
  bool broken_ = false;  // the output is closed: drop, keep the job going
  size_t lines_ = 0;
};

// Writes all of buf to fd (EINTR, short writes, EAGAIN on a non-blocking
// descriptor). Returns false when the descriptor is closed or broken.
bool WriteFully(int fd, const char* buf, size_t n);

}  // namespace zc::launcher
