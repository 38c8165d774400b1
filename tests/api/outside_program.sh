#!/bin/sh
# An outside C program, compiled only with what `pkg-config zcomm-uninstalled`
# says, run under zcrun and under Open MPI's mpirun (PMIx bootstrap), 3 ranks.
#   outside_program.sh BUILDDIR SOURCE ZCRUN
set -eu
build=$1 src=$2 zcrun=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=$(PKG_CONFIG_PATH="$build/meson-uninstalled" pkg-config --cflags --libs zcomm-uninstalled)
# A sanitizer build of libzcomm needs the program built with the same runtime.
case "${ZC_TEST_SANITIZE:-none}" in none|"") ;; *) flags="$flags -fsanitize=$ZC_TEST_SANITIZE" ;; esac
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror -o "$work/prog" "$src" $flags
export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== zcrun -np 3"
"$zcrun" -np 3 --timeout 60 "$work/prog" | tee "$work/zcrun.out"
grep -q "c_abi_program: 3 ranks OK" "$work/zcrun.out"
# Open MPI's by name: the mpirun alternative may point to MPICH's.
mpirun=$(command -v mpirun.openmpi || command -v mpirun || true)
if [ -n "$mpirun" ] && [ "${ZC_TEST_HAVE_PMIX:-0}" = 1 ]; then
  echo "== mpirun -np 3"
  timeout 90 "$mpirun" --allow-run-as-root --oversubscribe -np 3 -x LD_LIBRARY_PATH "$work/prog" \
    | tee "$work/mpirun.out"
  grep -q "c_abi_program: 3 ranks OK" "$work/mpirun.out"
else
  echo "mpirun part skipped: mpirun or PMIx support missing"
fi
