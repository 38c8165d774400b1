#!/bin/sh
# ZC_TRANSPORT=verbs where a rank has no RDMA device: the job fails, and the
# first error line it prints already names the cause (whichever rank zcrun
# hears from first), not only "rank N has no usable RDMA device".
#   verbs_no_device.sh ZCRUN PROGRAM
set -eu
zcrun=$1 prog=$2
if ls /sys/class/infiniband/* >/dev/null 2>&1; then
  echo "SKIP: this machine has an RDMA device"; exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ZC_TRANSPORT=verbs "$zcrun" -np 2 --timeout 60 "$prog" >"$out" 2>&1; then
  echo "FAIL: the job succeeded without an RDMA device"; cat "$out"; exit 1
fi
cat "$out"
first=$(grep -iE "error|fail|unsupported|zc_init" "$out" | head -n 1)
[ -n "$first" ] || { echo "FAIL: no error line"; exit 1; }
echo "first error line: $first"
# "... has no usable RDMA device: <reason>", the reason not empty.
if ! echo "$first" | grep -qE "ZC_TRANSPORT=verbs but rank [0-9]+ has no usable RDMA device: [^ ]" ||
   echo "$first" | grep -q "no reason given"; then
  echo "FAIL: the first error line does not name the reason"; exit 1
fi
echo "OK"
