// Command-line options of zcrun. Parsing is separate from acting on them so
// that tests can check every error message without starting a job.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace zc::launcher {

enum class BindPolicy { kDefault, kShare, kCore, kNuma, kNone };

struct Options {
  int np = 0;                        // 0: not given (then the host slots)
  std::vector<std::string> host_lists;  // each -H argument, "a:2,b"
  std::string hostfile;
  std::string rsh = "ssh -o BatchMode=yes {host}";
  BindPolicy bind = BindPolicy::kDefault;
  bool report_bindings = false;
  bool oversubscribe = false;
  double timeout_s = 0;              // 0: no job timeout
  std::vector<std::string> exports;  // -x VAR or VAR=VAL, as given
  bool tag_output = true;
  bool help = false;
  bool version = false;
  std::vector<std::string> command;  // program and its arguments
  // Elastic mode (launcher/elastic_supervisor.h), horovodrun's names:
  // --elastic, or any of --min-np, --max-np, --host-discovery-script.
  bool elastic = false;
  int min_np = 0;                    // 0: -np
  int max_np = 0;                    // 0: -np, or the discovered slots with a script
  std::string host_discovery_script;
};

// Parses argv (argv[0] is zcrun itself). A usage error returns
// ZC_ERR_INVALID_ARG with a message meant for "zcrun: <message>".
Status ParseOptions(int argc, const char* const* argv, Options* out);

const char* BindPolicyName(BindPolicy p);
std::string UsageText();

}  // namespace zc::launcher
