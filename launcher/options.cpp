#include "options.h"

#include <cstring>

#include "common/config.h"

namespace zc::launcher {
namespace {

bool ValidVarName(const std::string& name) {
  if (name.empty() || !(isalpha((unsigned char)name[0]) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!(isalnum((unsigned char)c) || c == '_')) return false;
  return true;
}

// Splits "--opt=value" into name and value; other arguments keep no value.
void SplitLong(const std::string& arg, std::string* name, std::string* value,
               bool* has_value) {
  *has_value = false;
  *name = arg;
  if (arg.rfind("--", 0) == 0) {
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      *name = arg.substr(0, eq);
      *value = arg.substr(eq + 1);
      *has_value = true;
    }
  }
}

}  // namespace

const char* BindPolicyName(BindPolicy p) {
  switch (p) {
    case BindPolicy::kDefault: return "default";
    case BindPolicy::kShare: return "share";
    case BindPolicy::kCore: return "core";
    case BindPolicy::kNuma: return "numa";
    case BindPolicy::kNone: return "none";
  }
  return "?";
}

std::string UsageText() {
  return
      "usage: zcrun -np N [options] program [args...]\n"
      "\n"
      "Starts N ranks of program, serves the job's key-value store, prefixes\n"
      "their output with the rank and stops the whole job when a rank fails.\n"
      "\n"
      "options:\n"
      "  -np N, -n N            number of ranks (default: the total slots of\n"
      "                         -H/--hostfile; required without them)\n"
      "  -H, --host LIST        hosts as host[:slots],... filled in order\n"
      "  --hostfile FILE        one host per line: \"host slots=N\" or \"host:N\";\n"
      "                         '#' starts a comment (also --machinefile)\n"
      "  --oversubscribe        allow more ranks than slots on remote hosts\n"
      "                         (always allowed on this host)\n"
      "  --rsh TEMPLATE         remote-shell command, {host} is replaced\n"
      "                         (default \"ssh -o BatchMode=yes {host}\"); e.g.\n"
      "                         \"ip netns exec {host}\"\n"
      "  --bind-to share|core|numa|none  CPU binding of local ranks: share\n"
      "                         gives each its share of the cores (cores /\n"
      "                         local ranks, side by side), core one core each;\n"
      "                         default share when they fit, else none\n"
      "  --report-bindings      print each rank's binding to stderr\n"
      "  --timeout S            kill the job after S seconds (exit 124)\n"
      "  -x VAR[=VAL]           set VAR in every rank; VAR alone forwards the\n"
      "                         current value (repeatable)\n"
      "  --tag-output           prefix every line with \"[rank] \" (default)\n"
      "  --no-tag-output        do not prefix lines\n"
      "  --elastic              keep the job going while ranks fail (see\n"
      "                         docs/elastic.md): replacements join it\n"
      "  --min-np N             elastic: end the job when fewer than N ranks\n"
      "                         live (default -np)\n"
      "  --max-np N             elastic: at most N ranks (default -np, or the\n"
      "                         slots the discovery script lists)\n"
      "  --host-discovery-script S  elastic: S prints \"host:slots\" lines;\n"
      "                         ranks join on new slots up to --max-np\n"
      "  -h, --help             this text\n"
      "  --version              print the version\n"
      "\n"
      "Each rank gets ZC_RANK, ZC_SIZE, ZC_LOCAL_RANK, ZC_LOCAL_SIZE, ZC_STORE\n"
      "and ZC_JOB_KEY. Exit status: 0 when every rank exits 0; the code of the\n"
      "first failing rank (128+signal when killed); 124 on --timeout; 2 on a\n"
      "usage error; 127 when the program is not found.\n";
}

Status ParseOptions(int argc, const char* const* argv, Options* out) {
  Options o;
  int i = 1;
  // Fetches the value of the option at argv[i]: "--opt=value" or the next
  // argument.
  auto take_value = [&](const std::string& name, bool has_inline,
                        const std::string& inline_value,
                        std::string* value) -> Status {
    if (has_inline) {
      *value = inline_value;
      return Status::Ok();
    }
    if (i + 1 >= argc)
      return Error(ZC_ERR_INVALID_ARG, "option %s needs a value", name.c_str());
    *value = argv[++i];
    return Status::Ok();
  };

  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the program

    std::string name, inline_value, value;
    bool has_inline = false;
    SplitLong(arg, &name, &inline_value, &has_inline);

    if (name == "-np" || name == "-n" || name == "--np") {
      ZC_RETURN_IF_ERROR(take_value(name, has_inline, inline_value, &value));
      long n = 0;
      if (!ParseInt(value.c_str(), 1, 1 << 20, &n))
        return Error(ZC_ERR_INVALID_ARG,
                     "bad %s '%s': expected a number of ranks >= 1",
                     name.c_str(), value.c_str());
      o.np = static_cast<int>(n);
    } else if (name == "-H" || name == "--host") {
      ZC_RETURN_IF_ERROR(take_value(name, has_inline, inline_value, &value));
      o.host_lists.push_back(value);
    } else if (name == "--hostfile" || name == "--machinefile") {
      ZC_RETURN_IF_ERROR(take_value(name, has_inline, inline_value, &value));
      if (!o.hostfile.empty())
        return Error(ZC_ERR_INVALID_ARG, "--hostfile given twice");
      o.hostfile = value;
    } else if (name == "--rsh") {
      ZC_RETURN_IF_ERROR(take_value(name, has_inline, inline_value, &value));
      if (value.find_first_not_of(" \t") == std::string::npos)
        return Error(ZC_ERR_INVALID_ARG, "--rsh template is empty");
      o.rsh = value;
    } else if (name == "--bind-to") {
      ZC_RETURN_IF_ERROR(take_value(name, has_inline, inline_value, &value));
      if (value == "share") o.bind = BindPolicy::kShare;
      else if (value == "core") o.bind = BindPolicy::kCore;
      else if (value == "numa") o.bind = BindPolicy::kNuma;
      else if (value == "none") o.bind = BindPolicy::kNone;
      else
        return Error(ZC_ERR_INVALID_ARG,
                     "bad --bind-to '%s': expected share, core, numa or none",
                     value.c_str());
    } else if (name == "--report-bindings") {
      o.report_bindings = true;
    } else if (name == "--oversubscribe") {
      o.oversubscribe = true;
    } else if (name == "--timeout") {
      ZC_RETURN_IF_ERROR(take_value(name, has_inline, inline_value, &value));
      double s = 0;
      if (!ParseDouble(value.c_str(), &s) || s <= 0 || s > 1e8)
        return Error(ZC_ERR_INVALID_ARG,
                     "bad --timeout '%s': expected seconds > 0",
                     value.c_str());
      o.timeout_s = s;
    } else if (name == "-x") {
      ZC_RETURN_IF_ERROR(take_value(name, false, "", &value));
      std::string var = value.substr(0, value.find('='));
      if (!ValidVarName(var))
        return Error(ZC_ERR_INVALID_ARG,
                     "bad -x '%s': expected VAR or VAR=VALUE with VAR made "
                     "of letters, digits and _",
                     value.c_str());
      o.exports.push_back(value);
    } else if (name == "--tag-output") {
      o.tag_output = true;
    } else if (name == "--no-tag-output") {
      o.tag_output = false;
    } else if (name == "--elastic") {
      o.elastic = true;
    } else if (name == "--min-np" || name == "--max-np") {
      ZC_RETURN_IF_ERROR(take_value(name, has_inline, inline_value, &value));
      long n = 0;
      if (!ParseInt(value.c_str(), 1, 1 << 20, &n))
        return Error(ZC_ERR_INVALID_ARG, "bad %s '%s': expected a number of ranks >= 1", name.c_str(),
                     value.c_str());
      (name == "--min-np" ? o.min_np : o.max_np) = static_cast<int>(n);
      o.elastic = true;
    } else if (name == "--host-discovery-script") {
      ZC_RETURN_IF_ERROR(take_value(name, has_inline, inline_value, &value));
      if (value.empty()) return Error(ZC_ERR_INVALID_ARG, "--host-discovery-script is empty");
      o.host_discovery_script = value;
      o.elastic = true;
    } else if (name == "-h" || name == "--help") {
      o.help = true;
    } else if (name == "--version") {
      o.version = true;
    } else {
      return Error(ZC_ERR_INVALID_ARG, "unknown option '%s' (see zcrun --help)",
                   arg.c_str());
    }
  }
  for (; i < argc; ++i) o.command.push_back(argv[i]);

  if (!o.help && !o.version) {
    if (o.command.empty())
      return Error(ZC_ERR_INVALID_ARG, "no program given (see zcrun --help)");
    if (o.command[0].empty())
      return Error(ZC_ERR_INVALID_ARG, "the program name is empty");
  }
  if (o.min_np && o.max_np && o.min_np > o.max_np)
    return Error(ZC_ERR_INVALID_ARG, "--min-np %d is above --max-np %d", o.min_np, o.max_np);
  if (o.elastic && o.np && o.min_np > o.np)
    return Error(ZC_ERR_INVALID_ARG, "--min-np %d is above -np %d", o.min_np, o.np);
  *out = std::move(o);
  return Status::Ok();
}

}  // namespace zc::launcher
