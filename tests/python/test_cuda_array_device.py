"""Device memory through __cuda_array_interface__ on a real GPU: CuPy arrays
and torch CUDA tensors take the stream-ordered path (zcomm/cuda_arrays.py
-> zc_*_on_stream).

- allreduce of every dtype and op (CuPy; torch: the dtypes its interface
  exports), in place and out of place, blocking and nonblocking, counts 0,
  1, 7, 4099 and 2^20 + 3, rank- and index-dependent data; broadcast from
  every root; allgather; the same buffers used again.
- Stream order, with no host synchronisation between producer, collective
  and consumer: the input is written on the stream behind a kernel that
  spins for milliseconds, and the output is read back on the same stream.
  A collective that read its input before the stream reached it would see
  the stale contents. CuPy's interface names its current stream (a
  non-blocking one here); torch's names none, which zcomm takes as the
  legacy default stream, torch's default.
- The CUDA driver loaded late: zcomm is initialised, and a host allreduce
  run, before the framework loads libcuda (src/gpu/load_watch.h).

Every rank uses device 0 (one GPU shared). Skips (77) without CuPy or a
CUDA torch, or without a GPU, as on every machine without one; the GPU run
is `scripts/gpu_check.sh`. Run under zcrun -np 2..4."""

import sys

import zctest  # noqa: F401  (skips without numpy)
from zctest import (DTYPES, FLOAT_OPS, FLOATS, INT_OPS, SKIP, Checker, ident, operand,
                    reduce_ref)

import numpy as np
import zcomm

COUNTS = [0, 1, 7, 4099, (1 << 20) + 3]
SPIN_CYCLES = 1_000_000  # 0.5 ms at the H200's 1.98 GHz, 3 ms idle-clocked

# The dtypes torch's __cuda_array_interface__ exports (no bfloat16, no
# unsigned wider than 8 bits).
TORCH_DTYPES = {"int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64",
                "bool"}


class CupyDevice:
    """CuPy arrays on a non-blocking stream of their own."""

    name = "cupy"

    def __init__(self, cp):
        self.cp = cp
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.spin = cp.RawKernel(r'''
extern "C" __global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
}''', "spin")

    def empty(self, a):
        with self.stream:
            return self.cp.empty(a.shape, a.dtype)

    def put(self, dev, a):
        """dev <- a, in stream order behind a spinning kernel."""
        with self.stream:
            self.spin((1,), (1,), (np.int64(SPIN_CYCLES),))
            dev.set(a, stream=self.stream)

    def get(self, dev):
        """dev's contents, read in stream order, then the stream drained."""
        out = dev.get(stream=self.stream)
        self.stream.synchronize()
        return out

    def call(self, fn):
        with self.stream:  # the interface names the current stream
            return fn()

    def stream_seen(self, dev):
        with self.stream:
            return dev.__cuda_array_interface__.get("stream")


class TorchDevice:
    """torch CUDA tensors on torch's default stream."""

    name = "torch"

    def __init__(self, torch):
        self.torch = torch

    def empty(self, a):
        return self.torch.empty(a.shape, dtype=self.torch.from_numpy(a[:0]).dtype, device="cuda")

    def put(self, dev, a):
        self.torch.cuda._sleep(SPIN_CYCLES)
        dev.copy_(self.torch.from_numpy(a), non_blocking=False)

    def get(self, dev):
        return dev.cpu().numpy()

    def call(self, fn):
        return fn()

    def stream_seen(self, dev):
        return dev.__cuda_array_interface__.get("stream")


def devices(rank):
    """The frameworks present with a GPU, each made only now (after zcomm's
    first calls), so that it loads libcuda late."""
    found = []
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() > 0:
            cp.cuda.Device(0).use()
            found.append(CupyDevice(cp))
    except Exception as e:  # no CuPy, or no GPU: the other framework may still run
        print(f"rank {rank}: no CuPy device ({type(e).__name__}: {e})", flush=True)
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.set_device(0)
            found.append(TorchDevice(torch))
    except Exception as e:
        print(f"rank {rank}: no torch CUDA device ({type(e).__name__}: {e})", flush=True)
    return found


def dtypes_of(dev):
    for name, _, dt in DTYPES:
        if dev.name == "cupy" or name in TORCH_DTYPES:
            yield name, dt


def check_allreduce(comm, c, dev):
    R, N = comm.rank, comm.size
    for name, dt in dtypes_of(dev):
        for op in (FLOAT_OPS if name in FLOATS else INT_OPS):
            for k, n in enumerate(COUNTS):
                if n > 4099 and op not in ("sum", "max"):
                    continue  # one large count per dtype and kind of op
                parts = [operand(name, op, n, r, k) for r in range(N)]
                want = reduce_ref(name, op, parts, N)
                what = f"{dev.name} allreduce {name} {op} n={n}"
                x = dev.empty(parts[R])
                dev.put(x, parts[R])
                mode = k % 3
                if mode == 0:  # in place, blocking
                    got = dev.call(lambda: comm.allreduce(x, op=op, dtype=dt))
                    c.true(got is x, what + ": in place returns its input")
                    res = dev.get(x)
                else:
                    out = dev.empty(parts[R])
                    dev.put(out, np.zeros_like(parts[R]))
                    if mode == 1:
                        got = dev.call(lambda: comm.allreduce(x, out, op=op, dtype=dt))
                    else:
                        req = dev.call(lambda: comm.iallreduce(x, out, op=op, dtype=dt))
                        got = req.wait()
                    c.true(got is out, what + ": returns out")
                    res = dev.get(out)
                    c.equal(name, dev.get(x), parts[R], what + ": input unchanged")
                c.equal(name, res, want, what, approx=op == "avg")


def check_broadcast_allgather(comm, c, dev):
    R, N = comm.rank, comm.size
    for name, dt in dtypes_of(dev):
        for k, n in enumerate(COUNTS):
            for root in range(N):
                mine = ident(name, n, R, salt=k)
                b = dev.empty(mine)
                dev.put(b, mine)
                dev.call(lambda: comm.broadcast(b, root=root, dtype=dt))
                c.equal(name, dev.get(b), ident(name, n, root, salt=k),
                        f"{dev.name} broadcast {name} n={n} root {root}")
            mine = ident(name, n, R, salt=k)
            x = dev.empty(mine)
            dev.put(x, mine)
            want = np.concatenate([ident(name, n, r, salt=k) for r in range(N)])
            g = dev.empty(want)
            dev.put(g, np.zeros_like(want))
            if k % 2:
                dev.call(lambda: comm.iallgather(x, g, dtype=dt)).wait()
            else:
                dev.call(lambda: comm.allgather(x, g, dtype=dt))
            c.equal(name, dev.get(g), want, f"{dev.name} allgather {name} n={n}")


def check_repeated(comm, c, dev):
    """The same device buffers through many calls, each input written anew."""
    R, N = comm.rank, comm.size
    n = 70001
    x = dev.empty(np.zeros(n, np.float32))
    out = dev.empty(np.zeros(n, np.float32))
    for it in range(20):
        dev.put(x, operand("float32", "sum", n, R, it))
        dev.call(lambda: comm.allreduce(x, out))
        want = reduce_ref("float32", "sum", [operand("float32", "sum", n, r, it)
                                             for r in range(N)], N)
        c.equal("float32", dev.get(out), want, f"{dev.name} allreduce iteration {it}")


def main():
    comm = zcomm.init()
    R, N = comm.rank, comm.size
    c = Checker(R, "cuda_array_device")
    with comm:
        # Host calls first: zcomm has seen no CUDA driver yet.
        h = np.full(5, R + 1, np.int64)
        comm.allreduce(h)
        c.equal("int64", h, np.full(5, N * (N + 1) // 2, np.int64), "host allreduce before CUDA")
        found = devices(R)
        if not found:
            print(f"SKIP: rank {R}: neither CuPy nor a CUDA torch sees a GPU", flush=True)
            comm.barrier()
            return SKIP
        names = comm.allgather(np.array([len(found)], np.int64), np.zeros(N, np.int64))
        c.true((names == len(found)).all(), f"every rank has the same frameworks: {names}")
        for dev in found:
            probe = dev.empty(np.zeros(1, np.float32))
            print(f"rank {R}: {dev.name}: interface stream {dev.stream_seen(probe)!r}", flush=True)
            check_allreduce(comm, c, dev)
            check_broadcast_allgather(comm, c, dev)
            check_repeated(comm, c, dev)
        comm.barrier()
    print(f"rank {R} of {N}: {c.checks} checks passed ({', '.join(d.name for d in found)})",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
