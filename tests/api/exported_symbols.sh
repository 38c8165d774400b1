#!/bin/sh
# libzcomm.so exports the C ABI and nothing else: every dynamic symbol it
# defines is a zc_* call, and every zc_* call that zcomm.h declares is there.
#   exported_symbols.sh LIBZCOMM_SO ZCOMM_H
set -eu
lib=$1 header=$2

# Linker-made symbols a shared library may define besides its own (only
# accepted when they really appear).
linker_symbols="_init _fini _edata _end __bss_start"

defined=$(nm -D --defined-only "$lib" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | sort -u)
[ -n "$defined" ] || { echo "FAIL: nm -D found no defined symbols in $lib"; exit 1; }
declared=$(grep -o '\bzc_[a-z0-9_]*(' "$header" | tr -d '(' | sort -u)
[ -n "$declared" ] || { echo "FAIL: no zc_* declarations found in $header"; exit 1; }

fail=0
for s in $defined; do
  case $s in
    zc_*) ;;
    *) if echo " $linker_symbols " | grep -q " $s "; then :; else
         echo "FAIL: $lib exports $s, which is not part of the C ABI (zc_*)"; fail=1
       fi ;;
  esac
done
for s in $declared; do
  if ! echo "$defined" | grep -qx "$s"; then
    echo "FAIL: $s is declared in zcomm.h but $lib does not export it"; fail=1
  fi
done
n=$(echo "$defined" | wc -l)
[ $fail = 0 ] && echo "OK: $lib exports $n symbols, all of them the C ABI"
exit $fail
