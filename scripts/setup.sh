#!/bin/sh
# Installs what zcomm needs from Debian's packages, if missing.
#   scripts/setup.sh            build + test dependencies
#   scripts/setup.sh --perf     also the peers the benchmarks compare with
#                               (Open MPI, MPICH, Gloo, gRPC, torch,
#                               matplotlib)
#   scripts/setup.sh --fuzz     also clang and libFuzzer, for scripts/fuzz.sh
#                               (the default build and tests need neither)
# Idempotent: when everything is present it only runs dpkg-query (< 1 s).
# slurmctld, slurmd, munge and openssh-server are for the tests that start
# their own cluster in network namespaces (tests/slurm); the tests run the
# daemons with configurations of their own and never use the system's
# services (on a machine with systemd, apt enables those: stop them if
# unwanted).
set -eu
perf=0
fuzz=0
for a in "$@"; do
  case "$a" in
    --perf) perf=1 ;;
    --fuzz) fuzz=1 ;;
    *) echo "setup: unknown option $a" >&2; exit 2 ;;
  esac
done

pkgs="meson ninja-build g++ gcc pkg-config iproute2 procps
libibverbs-dev librdmacm-dev ibverbs-providers libhwloc-dev hwloc libpmix-dev
libgtest-dev libgmock-dev googletest nlohmann-json3-dev
openmpi-bin libopenmpi-dev
python3 python3-numpy python3-pybind11 pybind11-dev python3-torch libtorch-dev python3-sklearn
python3-pytest python3-cloudpickle python3-mock
python3-venv python3-mesonpy
slurmctld slurmd slurm-client munge openssh-server openssh-client"
if [ "$perf" = 1 ]; then
  pkgs="$pkgs libgloo-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
mpich libmpich-dev
protobuf-compiler python3-matplotlib python3-torchvision"
fi
if [ "$fuzz" = 1 ]; then
  # libclang-rt-dev: libFuzzer and the sanitizer runtimes (a recommends of
  # clang, which --no-install-recommends would skip).
  pkgs="$pkgs clang libclang-rt-dev"
fi

missing=""
for p in $pkgs; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$st" in *" installed") ;; *) missing="$missing $p" ;; esac
done
if [ -z "$missing" ]; then
  echo "setup: all packages present"
  exit 0
fi
echo "setup: installing:$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
