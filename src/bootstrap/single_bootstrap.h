// SingleBootstrap: a job of one rank (neither zcrun nor PMIx). Put/Get work
// on a local table so code written for N ranks runs unchanged.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "bootstrap/bootstrap.h"

namespace zc {

class SingleBootstrap : public Bootstrap {
 public:
  SingleBootstrap();
  const char* kind() const override { return "single"; }
  Status Put(const std::string& key, const std::string& value) override;
  Status Fence(double timeout_s) override;
  Status Get(int rank, const std::string& key, std::string* value,
             double timeout_s) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
};

}  // namespace zc
