#!/bin/sh
# pip install as a Python user does it (docs/python.md): a fresh clone of
# SOURCE_ROOT's HEAD, a venv made with Debian's Python and
# --system-site-packages (numpy, torch), `pip install --no-build-isolation .`
# (meson-python, pyproject.toml). Then, with the clone deleted (nothing may
# come from a build tree): zcrun is the venv's, a 2-rank job under it
# imports zcomm and libzcomm from the venv and allreduces (numpy, and
# Horovod's API where zcomm.torch is built), and the versions agree:
# the wheel's metadata, zcomm.__version__ (zc_version) and meson's project().
#   pip_install.sh SOURCE_ROOT EXPECTED_VERSION
set -eu
src=$1 version=$2
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
skip() { echo "SKIP: $1"; exit 77; }
[ -x $python ] || skip "no $python"
$python -c 'import venv, ensurepip' 2>/dev/null || skip "python3-venv is not installed (scripts/setup.sh)"
$python -c 'import mesonpy' 2>/dev/null || skip "python3-mesonpy is not installed (scripts/setup.sh)"
$python -c 'import numpy' 2>/dev/null || skip "python3-numpy is not installed (scripts/setup.sh)"
git -C "$src" rev-parse --verify -q HEAD >/dev/null || skip "$src is not a git checkout"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Loopback only; this test's own compile, neither slowed nor fed by a
# cache of other builds (the same cold compile as a fresh machine's).
export ZC_SOCKET_IFNAME=lo CCACHE_DISABLE=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH VIRTUAL_ENV
t0=$(date +%s)
step() { echo "--- $(( $(date +%s) - t0 )) s: $1"; }

step "git clone $src (HEAD $(git -C "$src" rev-parse --short HEAD))"
git clone -q --no-hardlinks "$src" "$tmp/src"
step "venv: $python -m venv --system-site-packages"
$python -m venv --system-site-packages "$tmp/venv"
step "pip install --no-build-isolation ."
# --no-index: numpy comes from Debian (the venv sees the system's packages);
# nothing is downloaded. -O1 instead of pyproject's -O3 (given later, it
# wins): this test checks the package, not the code's speed, and at -O3 it
# was CI's longest test (380 s against 232 s).
# At nice 19: the tests that run beside it (tests/pip/meson.build) get the
# CPU whenever they want it.
if ! (cd "$tmp/src" && nice -n 19 "$tmp/venv/bin/pip" install --no-build-isolation --no-index -v \
        --config-settings=setup-args=-Doptimization=1 . \
        >"$tmp/pip.log" 2>&1); then
  cat "$tmp/pip.log"; echo "FAIL: pip install"; exit 1
fi
# meson's summary: what this build has.
grep -E "^ +(zcomm package|cuda|verbs|pmix|hwloc|optimization) *:|zcomm.torch not built" "$tmp/pip.log" || true
rm -rf "$tmp/src"
step "installed; clone deleted"

site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
export PATH="$tmp/venv/bin:$PATH"
[ "$(command -v zcrun)" = "$tmp/venv/bin/zcrun" ] || { echo "FAIL: zcrun on PATH is $(command -v zcrun), not the venv's"; exit 1; }
ls "$site/zcomm"
meta=$("$tmp/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("zcomm"))')
[ "$meta" = "$version" ] || { echo "FAIL: the wheel says version $meta, meson's project() $version"; exit 1; }
echo "OK: zcrun and zcomm $meta installed in the venv ($site)"

torch=0
if "$tmp/venv/bin/python" -c 'import torch' 2>/dev/null; then
  [ -d "$site/zcomm/torch" ] || { echo "FAIL: torch is importable but zcomm.torch was not installed"; exit 1; }
  torch=1
fi
step "2-rank job: zcrun -np 2 python installed_job.py (zcomm.torch: $torch)"
out=$(PIP_TEST_TORCH=$torch zcrun -np 2 --timeout 120 "$tmp/venv/bin/python" \
        "$here/installed_job.py" "$site" "$version" 2>&1) || {
  echo "$out"; echo "FAIL: the job under the venv's zcrun failed"; exit 1; }
echo "$out"
[ "$(echo "$out" | grep -c 'numpy allreduce of 1009 float64 correct')" = 2 ] || { echo "FAIL: not every rank checked its allreduce"; exit 1; }
if [ $torch = 1 ]; then
  [ "$(echo "$out" | grep -c 'zcomm.torch (Horovod API) allreduce correct')" = 2 ] || { echo "FAIL: not every rank checked zcomm.torch"; exit 1; }
else
  echo "note: torch is not importable here: zcomm.torch not checked"
fi
step "done"
