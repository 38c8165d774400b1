// SharedCounter: a counter in shared memory that forked ranks of one test
// (harness/multiproc.h) add to and wait on. A rank that must act only once
// the others have reached a point (entered a call, checked a result) waits on
// it instead of sleeping a guessed time. Create it in the test before
// RunRanks: the ranks inherit the mapping.
#pragma once

namespace zc::test {

class SharedCounter {
 public:
  SharedCounter();   // aborts the test program if shared memory is refused
  ~SharedCounter();  // unmaps (in whichever process destroys it)
  SharedCounter(const SharedCounter&) = delete;
  SharedCounter& operator=(const SharedCounter&) = delete;

  void Add(int n = 1);
  int value() const;
  // Blocks until value() >= n; false when timeout_s passes first.
  bool WaitAtLeast(int n, double timeout_s) const;

 private:
  struct Shared;
  Shared* s_;
};

}  // namespace zc::test
