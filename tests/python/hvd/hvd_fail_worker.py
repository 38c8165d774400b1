"""One rank of test_hvd_failures.py.

mismatch: the last rank submits 'w' with another shape (then another dtype,
another root); every rank's synchronize raises HorovodInternalError naming
the tensor, and the engine goes on (later calls, and 'w' itself, work).
mistakes: a caller's local mistakes (a name already pending, bad alltoall
splits) raise ValueError on that rank only; the engine goes on.
join_others: each rank in turn joins first; meanwhile the others'
allgather and broadcast raise at once, their allreduce works; join returns.
peer_shutdown: rank 0 shuts down; the others' next call raises, they report
is_initialized() False, and init() on every rank starts the engine anew.
reinit_race: the others' shutdown() stops rank 0's engine before it asks
is_initialized(), which is still True (only a rank's own calls change it),
and init() does nothing until this rank's shutdown(); then init();
is_initialized(); shutdown(); init() ten times back to back.
killed: the last rank SIGKILLs itself in the middle of training; every other
rank's engine ends with an error (no hang), printed as 'ERROR rank R'."""
import os
import signal
import sys
import time

import torch

import zcomm.torch as hvd


def mismatch():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    hvd.allreduce(torch.ones(4), name="fine")  # the engine works before
    cases = [("shape", lambda: hvd.allreduce(torch.ones((4, 5) if r == n - 1 else (4, 3)),
                                             name="w"), ("[4, 3]", "[4, 5]")),
             ("dtype", lambda: hvd.allgather(torch.ones(3, dtype=torch.int32 if r == n - 1
                                                        else torch.float32), name="g"),
              ("int32", "float32")),
             ("root", lambda: hvd.broadcast(torch.ones(2), root_rank=r, name="b"), ("root",))]
    for what, call, parts in cases:
        try:
            call()
            raise AssertionError("rank %d: the %s mismatch did not raise" % (r, what))
        except hvd.HorovodInternalError as e:
            msg = str(e)
            assert isinstance(e, RuntimeError)
            for part in ("rank %d" % r, "mismatch") + parts:
                assert part in msg, "rank %d: %r not in the message: %s" % (r, part, msg)
            print("MISMATCH rank %d: %s" % (r, msg), flush=True)
        assert hvd.is_initialized(), "rank %d: the engine stopped after a mismatch" % r
    # The engine goes on, and the same names work once the ranks agree.
    out = hvd.allreduce(torch.full((4, 3), float(r)), name="w", op=hvd.Sum)
    assert torch.equal(out, torch.full((4, 3), float(n * (n - 1) // 2))), out
    out = hvd.broadcast(torch.full((2,), float(r)), root_rank=n - 1, name="b")
    assert torch.equal(out, torch.full((2,), float(n - 1))), out
    hvd.barrier()
    hvd.shutdown()
    print("OK rank %d" % r, flush=True)


def _value_error(fn, what, *parts):
    try:
        fn()
    except ValueError as e:
        for part in parts:
            assert part in str(e), "%s: %r not in %s" % (what, part, e)
        return
    raise AssertionError("rank %d: %s did not raise ValueError" % (hvd.rank(), what))


def mistakes():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    x = torch.ones(5)
    # A name pending twice on one rank (the last), while the others have not
    # submitted it: only that rank's second call fails.
    if r == n - 1:
        h = hvd.allreduce_async(x, name="dup", op=hvd.Sum)
        _value_error(lambda: hvd.allreduce_async(x, name="dup"), "duplicate allreduce",
                     "already pending")
        _value_error(lambda: hvd.allgather_async(x, name="dup_g") and
                     hvd.allgather_async(x, name="dup_g"), "duplicate allgather", "already pending")
    hvd.barrier()
    if r != n - 1:
        h = hvd.allreduce_async(x, name="dup", op=hvd.Sum)
        hvd.allgather_async(x, name="dup_g")
    assert torch.equal(hvd.synchronize(h), torch.full((5,), float(n)))
    # Bad alltoall splits, on every rank alike (each fails locally).
    _value_error(lambda: hvd.alltoall(torch.ones(n + 1)), "uneven first dimension", "divide")
    _value_error(lambda: hvd.alltoall(torch.ones(max(n - 1, 0)), torch.ones(n, dtype=torch.int32)),
                 "splits summing past the rows", "splits sum")
    _value_error(lambda: hvd.alltoall(torch.ones(n), torch.empty(n, dtype=torch.float32)),
                 "float splits", "int32")
    _value_error(lambda: hvd.alltoall(torch.ones(n), [1] * (n + 1)), "too many splits",
                 "one per rank")
    _value_error(lambda: hvd.alltoall(torch.ones(n), [-1] + [1] * (n - 1)), "a negative split",
                 "negative")
    _value_error(lambda: hvd.broadcast(torch.ones(2), root_rank=n), "a root out of range",
                 "root_rank")
    _value_error(lambda: hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0])),
                 "an unregistered process set", "not registered")
    # The engine is fine.
    out = hvd.allreduce(torch.full((3,), float(r)), op=hvd.Sum, name="after")
    assert torch.equal(out, torch.full((3,), float(n * (n - 1) // 2))), out
    hvd.barrier()
    hvd.shutdown()
    print("OK rank %d" % r, flush=True)


def join_others():
    # As Horovod's test_horovod_join_allgather/_broadcast: while one rank has
    # joined, an allgather or a broadcast on the others raises at once, and
    # join still returns on every rank; allreduce meanwhile works (zeros
    # stand in for the joined rank).
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    for first in range(n):
        if r != first:
            for what, call in (("allgather", lambda: hvd.allgather(torch.ones(17, 3))),
                               ("broadcast", lambda: hvd.broadcast(torch.ones(5), root_rank=r))):
                try:
                    call()
                    raise AssertionError("rank %d: %s while rank %d joined did not raise"
                                         % (r, what, first))
                except RuntimeError as e:
                    assert "join" in str(e), e
            out = hvd.allreduce(torch.full((3,), 1.0 + r), op=hvd.Sum, name="while_joined")
            want = sum(1.0 + q for q in range(n) if q != first)
            assert torch.equal(out, torch.full((3,), want)), (out, want)
        last = hvd.join()
        assert 0 <= last < n, last
    out = hvd.allgather(torch.full((2,), float(r)))  # the engine goes on
    assert out.tolist() == [float(q) for q in range(n) for _ in range(2)], out
    hvd.shutdown()
    print("OK rank %d" % r, flush=True)


def peer_shutdown():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    hvd.barrier()
    if r == 0:
        hvd.shutdown()
        assert not hvd.is_initialized()
    else:
        try:
            while True:  # until the engine reports rank 0's shutdown
                hvd.allreduce(torch.ones(1), name="until_shutdown")
        except hvd.HorovodInternalError as e:  # the submission or the wait learnt it
            assert "shut down" in str(e), e
        assert not hvd.is_initialized(), "rank %d: a stopped engine says it runs" % r
        try:
            hvd.allreduce(torch.ones(1))
            raise AssertionError("rank %d: a call on the stopped engine did not raise" % r)
        except ValueError as e:
            assert "hvd.init()" in str(e) and "shut down" in str(e), e
    hvd.init()  # every rank: a new engine
    assert hvd.is_initialized()
    out = hvd.allreduce(torch.full((2,), float(r)), op=hvd.Sum, name="after_restart")
    assert torch.equal(out, torch.full((2,), float(n * (n - 1) // 2))), out
    hvd.shutdown()
    print("OK rank %d" % r, flush=True)


def reinit_race():
    # Horovod's test_horovod_is_initialized, in one job with its neighbours:
    # every rank runs init(); is_initialized(); shutdown(); init(), and a
    # fast rank's shutdown() stops the slow ranks' new engine before they ask
    # is_initialized(). They must still see True: only their own calls
    # change it.
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    hvd.barrier()
    if r == 0:  # the slow rank: waits until the others' shutdown stopped its engine
        deadline = time.monotonic() + 60
        while not hvd.mpi_ops._eng.error():
            assert time.monotonic() < deadline, "rank 0: the peers' shutdown never arrived"
            time.sleep(0.001)
        assert "shut down" in hvd.mpi_ops._eng.error(), hvd.mpi_ops._eng.error()
        assert hvd.is_initialized(), "rank 0: a peer's shutdown flipped is_initialized() by itself"
        hvd.init()  # nothing to do while is_initialized() is True: the old engine stays
        assert hvd.mpi_ops._eng.error(), "rank 0: init() started an engine the others do not start"
    hvd.shutdown()
    assert not hvd.is_initialized()
    hvd.init()  # every rank: a new engine, whatever state rank 0's old one was in
    assert hvd.is_initialized()
    for i in range(10):  # the sequence itself, back to back
        hvd.init()
        assert hvd.is_initialized(), "rank %d, round %d: not initialized right after init()" % (r, i)
        hvd.shutdown()
        assert not hvd.is_initialized()
        hvd.init()
        out = hvd.allreduce(torch.full((2,), float(r)), op=hvd.Sum, name="round%d" % i)
        assert torch.equal(out, torch.full((2,), float(n * (n - 1) // 2))), out
        hvd.barrier()
        hvd.shutdown()
    print("OK rank %d" % r, flush=True)


def killed():
    # zcrun SIGTERMs the job once a rank dies: the survivors wait for their
    # own engine's verdict instead (zcrun SIGKILLs after its grace period).
    signal.signal(signal.SIGTERM, lambda *a: None)
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    model = torch.nn.Linear(64, 64)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    x = torch.randn(8, 64)
    step = 0
    try:
        while True:
            if r == n - 1 and step == 5:
                os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            step += 1
            if step == 5:
                t0 = time.time()
            assert step < 100000, "rank %d: the victim's death was never noticed" % r
    except hvd.HorovodInternalError as e:
        print("ERROR rank %d after %.2f s at step %d: %s" % (r, time.time() - t0, step, e),
              flush=True)
    os._exit(0)


if __name__ == "__main__":
    {"mismatch": mismatch, "mistakes": mistakes, "peer_shutdown": peer_shutdown,
     "join_others": join_others, "reinit_race": reinit_race, "killed": killed}[sys.argv[1]]()
