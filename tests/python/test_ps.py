"""The parameter server from Python (zcomm.ps): synchronous sums of every
dtype and SGD values against numpy references, with rank- and
round-dependent data, keys from one element to many chunks (run with a small
ZC_PS_PARTITION), multi-dimensional and non-contiguous arrays, blocking and
nonblocking calls; asynchronous sums and SGD; a pull blocked in one thread
while the main thread sends (the GIL is released); requests keeping their
arrays alive; and bad inputs raising zcomm.Error. Run under zcrun -np 2..4
with "both" (every rank a worker and a server) or "servers" (the last ranks
server-only)."""

import gc
import linecache
import sys
import threading
import time

import zctest
from zctest import DTYPES, FLOATS, Checker, decode, encode, operand, reduce_ref

import numpy as np
import zcomm
from zcomm import Status

# one element, primes, exactly one 256-byte chunk for float32, many chunks
SHAPES = [1, 7, (8, 8), 257, (7, 11, 13)]
ROUNDS = 3


def roles(n, layout):
    if layout == "both" or n == 1:
        return ["both"] * n
    servers = 1 if n < 4 else 2
    return ["worker"] * (n - servers) + ["server"] * servers


def expect(c, status, text, what, f, *args, **kw):
    """f(*args) raises zcomm.Error with `status` and `text` in its message."""
    try:
        f(*args, **kw)
    except zcomm.Error as e:
        c.true(e.status == status and text in e.message and e.message.startswith("rank "),
               f"{what}: got {e.status.name}: {e.message!r}, want {status.name} with {text!r}")
        return e
    c.fail(f"{what}: no error")


def wait_at_call(ident, func, call, timeout=20):
    """Until the thread `ident` is at the line of `func` that makes `call`
    (the blocking C call, which releases the GIL): a thread acts once another
    is inside that call instead of after a guessed delay. Polls the thread's
    Python stack, an observable condition. False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        f = sys._current_frames().get(ident)
        while f is not None:
            if (f.f_code.co_name == func
                    and call in linecache.getline(f.f_code.co_filename, f.f_lineno)):
                return True
            f = f.f_back
        time.sleep(0.001)
    return False


def sums(comm, role, c):
    """Synchronous sums of every dtype and shape, 3 rounds."""
    R = comm.rank
    with zcomm.ps.ParameterServer(comm, role=role) as ps:
        W = ps.num_workers  # the workers are ranks 0 .. W-1
        if role == "server":
            # Another thread reads the state while serve() runs (it must not
            # wait for serve) and tells worker 0, which waits for that.
            main = threading.get_ident()

            def peek():
                c.true(wait_at_call(main, "serve", "self._h.serve("), "serve() never started")
                if not ps.freed and repr(ps):
                    comm.send(np.array([1], np.int8), 0, tag=9)
            th = threading.Thread(target=peek)
            if R == W:
                th.start()
            ps.serve()
            if R == W:
                th.join()
            return
        if role == "worker" and R == 0:
            comm.recv(np.zeros(1, np.int8), W, tag=9)
        keys = []
        for d, (name, t, dt) in enumerate(DTYPES):
            for s, shape in enumerate(SHAPES):
                key = 1000 + d * 10 + s
                ps.declare(key, shape, "bfloat16" if dt else t)
                keys.append((key, name, t, shape))
        c.true(ps.keys()[1000][1] == zcomm.Dtype.INT8, "keys()")
        for r in range(1, ROUNDS + 1):
            for key, name, t, shape in keys:
                n = int(np.prod(shape))
                grad = lambda w: operand(name, "sum", n, w, salt=r * 13 + key)  # noqa: E731
                want = reduce_ref(name, "sum", [grad(w) for w in range(W)], W)
                x = grad(R).reshape(shape)
                if r == 1:
                    ps.push(key, x)
                    got = ps.pull(key)
                    c.true(got.shape == (shape if isinstance(shape, tuple) else (shape,))
                           and got.dtype == t, f"pull's array {got.shape} {got.dtype}")
                elif r == 2:  # nonblocking; a strided output
                    buf = np.zeros(2 * n, t)
                    out = buf[::2]
                    a = ps.ipush(key, x)
                    b = ps.ipull(key, out=out)
                    c.true(a.wait() is None, "ipush's wait")
                    got = b.wait()
                    c.true(got is out, "ipull returns its out")
                    c.true(not buf[1::2].any(), "staged output wrote only its elements")
                else:  # Fortran order in; a given contiguous output
                    out = np.empty(shape, t)
                    ps.push(key, np.asfortranarray(x))
                    got = ps.pull(key, out=out)
                    c.true(got is out, "pull returns its out")
                c.equal(name, got.reshape(-1), want, f"sum key {key} {name} shape {shape} round {r}")
        # The GIL is released in a blocking pull: worker 0 pulls in a thread,
        # a pull that waits for worker 1's push, which worker 1 makes only
        # once worker 0's main thread has sent it a message.
        if W >= 2:
            ps.declare(7, 5, "int64")
            x = np.full(5, R + 1, np.int64)
            if R == 0:
                ps.push(7, x)
                box = {}
                th = threading.Thread(target=lambda: box.update(v=ps.pull(7)))
                th.start()
                c.true(wait_at_call(th.ident, "pull", "self._h.pull("), "the thread's pull never started")
                comm.send(np.array([1], np.int8), 1, tag=5)
                th.join(60)
                c.true(not th.is_alive(), "pull in a thread returned")
                c.true(box["v"].tolist() == [W * (W + 1) // 2] * 5, f"threaded pull {box}")
            else:
                if R == 1:
                    comm.recv(np.zeros(1, np.int8), 0, tag=5)
                ps.push(7, x)
                c.true(ps.pull(7).tolist() == [W * (W + 1) // 2] * 5, "pull beside the thread")
        # Requests keep their arrays alive: nothing else refers to them here.
        ps.declare(8, 3001, "float32")
        for k in range(2):
            a = ps.ipush(8, np.full(3001, float(R + k), np.float32))
            b = ps.ipull(8)
            gc.collect()
            got = b.wait()
            a.wait()
            want = sum(w + k for w in range(W))
            c.true(got.shape == (3001,) and (got == want).all(), f"kept arrays round {k}: {got[:3]}")


def sgd(comm, role, c):
    """Synchronous SGD of the floating types: value -= lr * mean(pushes)."""
    R, lr = comm.rank, 0.25
    with zcomm.ps.ParameterServer(comm, role=role, sgd_lr=lr) as ps:
        if role == "server":
            ps.serve()
            return
        W = ps.num_workers
        expect(c, Status.INVALID_ARG, "floating", "sgd on int32",
               ps.declare, 99, 10, "int32")
        for name in ("int16", "uint16", "bool"):
            expect(c, Status.INVALID_ARG, "not " + name, "sgd on " + name,
                   ps.declare, 98, 10, name)
        n = 1000
        refs = {}
        for d, (name, t, dt) in enumerate(DTYPES):
            if name not in FLOATS:
                continue
            start = np.arange(n) % 13 - 4
            # Only the first worker's init counts: the others pass garbage.
            init = encode(name, start if R == 0 else np.full(n, 999)).reshape(10, 100)
            ps.declare(d, (10, 100), "bfloat16" if dt else None, init=init)
            refs[d] = (name, start.astype(np.float64))
        tol = {"float16": 0.2, "bfloat16": 0.2, "float32": 1e-4, "float64": 1e-9}
        for r in range(1, ROUNDS + 1):
            for d, (name, ref) in refs.items():
                grads = [operand(name, "sum", n, w, salt=r + d) for w in range(W)]
                mean = sum(decode(name, g).astype(np.float64) for g in grads) / W
                ps.push(d, grads[R].reshape(10, 100))
                got = decode(name, ps.pull(d).reshape(-1)).astype(np.float64)
                want = ref - lr * mean
                c.true(np.all(np.abs(got - want) <= tol[name] * (1 + np.abs(want))),
                       f"sgd {name} round {r}: got {got[:4]}, want {want[:4]}")
                refs[d] = (name, got)  # follow the server's rounding from here


def asynchronous(comm, role, c, lr):
    """Pushes applied on arrival; once every worker has pushed, a pull sees
    every push (polled with a deadline)."""
    R = comm.rank
    with zcomm.ps.ParameterServer(comm, role=role, async_mode=True, sgd_lr=lr) as ps:
        if role == "server":
            ps.serve()
            return
        c.true(ps.async_mode and ps.sgd_lr == lr, "options")
        W, n, pushes = ps.num_workers, 300, 10
        init = (np.arange(n) % 5).astype(np.float64)
        ps.declare(1, n, np.float64, init=init)
        for k in range(pushes):
            g = np.full(n, float(R + 1))
            if k % 2:
                ps.ipush(1, g).wait()
                ps.ipull(1).wait()
            else:
                ps.push(1, g)
                ps.pull(1)
        total = sum((w + 1) * pushes for w in range(W))
        want = init - lr * total if lr > 0 else init + total
        deadline = time.monotonic() + 20
        while True:
            got = ps.pull(1)
            if np.allclose(got, want, rtol=0, atol=1e-9):
                break
            c.true(time.monotonic() < deadline, f"async lr={lr}: {got[:3]}, want {want[:3]}")
            time.sleep(0.01)
        c.checks += 1


def bad_inputs(comm, role, c):
    R, N = comm.rank, comm.size
    expect(c, Status.INVALID_ARG, "unknown role", "bad role", zcomm.ps.ParameterServer, comm,
           role="boss")
    expect(c, Status.INVALID_ARG, "sgd_lr", "negative lr", zcomm.ps.ParameterServer, comm,
           role=role, sgd_lr=-1.0)
    if N >= 2:  # options that differ between ranks: every rank fails
        expect(c, Status.MISMATCH, "", "options differ", zcomm.ps.ParameterServer, comm,
               role=role, sgd_lr=0.5 if R == 1 else 0.0)
    ps = zcomm.ps.ParameterServer(comm, role=role)
    expect(c, Status.INVALID_ARG, "parameter server", "finalize under a ps", comm.finalize)
    if role == "server":
        expect(c, Status.INVALID_ARG, "not a worker", "declare on a server",
               ps.declare, 1, 10, "int32")
        expect(c, Status.INVALID_ARG, "not a worker", "push on a server",
               ps.push, 1, np.zeros(10, np.int32))
        ps.serve()
        ps.free()
        return
    W = ps.num_workers
    expect(c, Status.INVALID_ARG, "serve", "serve on a worker", ps.serve)
    x = np.ones(100, np.float32)
    expect(c, Status.INVALID_ARG, "key 5 is not declared", "push undeclared", ps.push, 5, x)
    expect(c, Status.INVALID_ARG, "key 5 is not declared", "pull undeclared", ps.pull, 5)
    expect(c, Status.INVALID_ARG, "key 5 is not declared", "ipull undeclared", ps.ipull, 5)
    expect(c, Status.INVALID_ARG, "key", "negative key", ps.declare, -1, 10, "float32")
    expect(c, Status.INVALID_ARG, "count is 0", "count 0", ps.declare, 5, 0, "float32")
    e = expect(c, Status.INVALID_ARG, "unsupported dtype", "complex dtype", ps.declare, 5, 10,
               np.complex64)
    c.true(isinstance(e, zcomm.DtypeError), "a DtypeError")
    if W >= 2:  # workers that disagree: every worker fails, naming it
        expect(c, Status.MISMATCH, "disagree", "declare sizes differ",
               ps.declare, 6, 100 if R == 0 else 99, "float32")
        expect(c, Status.MISMATCH, "int32", "declare dtypes differ",
               ps.declare, 6, 100, "float32" if R == 0 else "int32")
    ps.declare(6, (10, 10), "float32")
    expect(c, Status.INVALID_ARG, "already declared", "declared twice",
           ps.declare, 6, (10, 10), "float32")
    expect(c, Status.INVALID_ARG, "holds 100 elements", "push too small",
           ps.push, 6, np.ones(99, np.float32))
    expect(c, Status.INVALID_ARG, "holds 100 elements", "push too large",
           ps.push, 6, np.ones(101, np.float32))
    expect(c, Status.INVALID_ARG, "holds float32", "push int32", ps.push, 6, np.ones(100, np.int32))
    expect(c, Status.INVALID_ARG, "numpy array", "push a list", ps.push, 6, [1.0] * 100)
    expect(c, Status.INVALID_ARG, "pull before push", "pull before push", ps.pull, 6)
    ps.push(6, x.reshape(10, 10))
    expect(c, Status.INVALID_ARG, "pushed twice", "push twice", ps.push, 6, x)
    expect(c, Status.INVALID_ARG, "pushed twice", "ipush twice", ps.ipush, 6, x)
    expect(c, Status.INVALID_ARG, "holds 100 elements", "out too small",
           ps.pull, 6, out=np.zeros(50, np.float32))
    expect(c, Status.INVALID_ARG, "read-only", "read-only out",
           ps.pull, 6, out=np.broadcast_to(np.float32(0), (100,)))
    # Still usable after all that.
    got = ps.pull(6)
    c.true((got == W).all(), f"sum after the errors: {got.ravel()[:3]}")
    ps.free()
    ps.free()  # harmless
    expect(c, Status.INVALID_ARG, "freed", "push after free", ps.push, 6, x)


def main():
    layout = sys.argv[1] if len(sys.argv) > 1 else "both"
    comm = zcomm.init()
    R, N = comm.rank, comm.size
    role = roles(N, layout)[R]
    c = Checker(R, f"ps {layout}")
    with comm:
        sums(comm, role, c)
        sgd(comm, role, c)
        asynchronous(comm, role, c, 0.0)
        asynchronous(comm, role, c, 0.5)
        bad_inputs(comm, role, c)
        # The communicator is still usable, and finalizes once they are freed.
        c.true(comm.allreduce(np.ones(3, np.int32)).tolist() == [N] * 3, "comm after ps")
    print(f"rank {R} ({role}): {c.checks} checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
