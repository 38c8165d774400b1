// The command line that starts one rank: the program itself for ranks on
// this machine, or "<rsh template with {host}> env VAR=... prog args" for
// other hosts, quoted so that the remote shell sees the exact arguments.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace zc::launcher {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// POSIX shell quoting: safe words stay as they are, anything else goes in
// single quotes ('it'\''s').
std::string ShellQuote(const std::string& word);
std::string ShellJoin(const std::vector<std::string>& words);

// Splits a template into words (whitespace, '...', "...", \x) and replaces
// {host} in every word. An unterminated quote is an error.
Status ExpandRshTemplate(const std::string& tmpl, const std::string& host,
                         std::vector<std::string>* words);

// True when the template's program hands its arguments to a remote shell
// that splits them again (ssh, rsh): the rank's command then travels as one
// quoted string. Local wrappers (ip netns exec, env, sudo) exec the words as
// they are.
bool TemplateUsesRemoteShell(const std::vector<std::string>& rsh_words);

// How a rank started through a remote shell ended, from ssh's exit code:
// 128+S (S up to 64) is signal S (*signal = S; the shell's convention, so
// a program that itself exits 128+S reads the same); 255 is ssh's own
// failure (a description returned); else *signal = 0 and "".
std::string RemoteShellFailure(int exit_code, int* signal);

// argv for a rank on another host. Variables named in `secret_names` (the
// job key) never appear on a command line, where any user of either host
// could read them with ps: the remote side reads them, one line each in
// that order, from its standard input (`sh -c 'IFS= read -r K && export K
// && exec env ... prog'`), and the caller writes them there (SecretInput).
// Through a remote shell (ssh) the rank is the shell's child instead
// (`sh -c '... env ... prog; exit $?'`), so that a rank killed by signal S
// makes ssh exit with 128+S (see RemoteShellFailure).
Status BuildRemoteArgv(const std::string& tmpl, const std::string& host,
                       const EnvList& env,
                       const std::vector<std::string>& command,
                       std::vector<std::string>* argv,
                       const std::vector<std::string>& secret_names = {"ZC_JOB_KEY"});

// The bytes to write to the remote rank's standard input: the values of the
// secret variables of `env`, one line each, in secret_names' order.
std::string SecretInput(const EnvList& env,
                        const std::vector<std::string>& secret_names = {"ZC_JOB_KEY"});

}  // namespace zc::launcher
