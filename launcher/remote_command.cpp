#include "remote_command.h"

#include <cstring>

namespace zc::launcher {

std::string ShellQuote(const std::string& word) {
  if (word.empty()) return "''";
  bool safe = true;
  for (char c : word) {
    if (!(isalnum((unsigned char)c) || strchr("@%_+=:,./-", c) != nullptr)) {
      safe = false;
      break;
    }
  }
  if (safe) return word;
  std::string q = "'";
  for (char c : word) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  q += "'";
  return q;
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) {
    if (!s.empty()) s += ' ';
    s += ShellQuote(w);
  }
  return s;
}

Status ExpandRshTemplate(const std::string& tmpl, const std::string& host,
                         std::vector<std::string>* words) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else if (c == '\'' || c == '"') {
      size_t end = tmpl.find(c, i + 1);
      if (end == std::string::npos)
        return Error(ZC_ERR_INVALID_ARG,
                     "--rsh template '%s': unterminated %c quote",
                     tmpl.c_str(), c);
      cur += tmpl.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == '\\' && i + 1 < tmpl.size()) {
      cur += tmpl[++i];
      in_word = true;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word) out.push_back(cur);
  if (out.empty())
    return Error(ZC_ERR_INVALID_ARG, "--rsh template is empty");
  for (std::string& w : out) {
    size_t pos = 0;
    while ((pos = w.find("{host}", pos)) != std::string::npos) {
      w.replace(pos, 6, host);
      pos += host.size();
    }
  }
  *words = std::move(out);
  return Status::Ok();
}

bool TemplateUsesRemoteShell(const std::vector<std::string>& rsh_words) {
  if (rsh_words.empty()) return false;
  std::string prog = rsh_words[0];
  size_t slash = prog.rfind('/');
  if (slash != std::string::npos) prog = prog.substr(slash + 1);
  return prog == "ssh" || prog == "rsh" ||
         (prog.size() > 3 && prog.compare(prog.size() - 3, 3, "ssh") == 0);
}

namespace {
bool IsSecret(const std::string& name, const std::vector<std::string>& secret_names) {
  for (const std::string& s : secret_names)
    if (s == name) return true;
  return false;
}
}  // namespace

Status BuildRemoteArgv(const std::string& tmpl, const std::string& host,
                       const EnvList& env,
                       const std::vector<std::string>& command,
                       std::vector<std::string>* argv,
                       const std::vector<std::string>& secret_names) {
  std::vector<std::string> words;
  ZC_RETURN_IF_ERROR(ExpandRshTemplate(tmpl, host, &words));
  // ssh does not carry the environment: it goes on the command line, all
  // but the secrets, which the remote shell reads from standard input.
  std::vector<std::string> remote = {"env"};
  std::string reads;
  for (const std::string& name : secret_names) {
    bool present = false;
    for (const auto& [k, v] : env) present = present || k == name;
    if (present) reads += "IFS= read -r " + name + " && export " + name + " && ";
  }
  for (const auto& [k, v] : env)
    if (!IsSecret(k, secret_names)) remote.push_back(k + "=" + v);
  remote.insert(remote.end(), command.begin(), command.end());
  if (TemplateUsesRemoteShell(words)) {
    // ssh reports a remote process killed by a signal as its own failure
    // (exit 255), so the rank runs as a child of the remote shell, which
    // exits 128+S when it dies of signal S (not the last command, so no
    // shell execs it); RemoteShellFailure reads that back.
    words.push_back(ShellJoin({"sh", "-c", reads + ShellJoin(remote) + "; exit $?"}));
  } else {
    std::vector<std::string> wrapped = remote;
    if (!reads.empty()) wrapped = {"sh", "-c", reads + "exec " + ShellJoin(remote)};
    words.insert(words.end(), wrapped.begin(), wrapped.end());
  }
  *argv = std::move(words);
  return Status::Ok();
}

std::string RemoteShellFailure(int exit_code, int* signal) {
  *signal = 0;
  if (exit_code == 255) return "exited with code 255 (ssh's own failure: the connection failed or was lost)";
  if (exit_code > 128 && exit_code < 128 + 65) {
    *signal = exit_code - 128;
    return "";
  }
  return "";
}

std::string SecretInput(const EnvList& env, const std::vector<std::string>& secret_names) {
  std::string out;
  for (const std::string& name : secret_names)
    for (const auto& [k, v] : env)
      if (k == name) {
        out += v + "\n";
        break;
      }
  return out;
}

}  // namespace zc::launcher
