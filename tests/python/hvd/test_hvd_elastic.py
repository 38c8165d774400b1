"""Horovod's elastic API on zcomm (docs/elastic.md): 4 ranks (spawned, the
job from a zcomm unique id) train a model with hvd.DistributedOptimizer
inside hvd.elastic.run; rank 3 kills itself (SIGKILL) in the middle of
epoch 1. The survivors get HorovodInternalError naming the lost rank, roll
back to the last commit, shrink to 3 ranks and finish. (A survivor
that the alert of another reaches first gets that alert as the cause: at
least one names the lost rank.) Checked: the final
parameters are bitwise identical on every survivor and bitwise equal to a
reference computed in this process that follows the same membership
schedule (4 ranks up to the commit the survivors resumed from, then 3).

Why bitwise: every gradient is an integer tensor (loss = sum(w * C) with
integer C that depends on rank, epoch and batch), summed across ranks
(op=hvd.Sum). Integer sums below 2**24 are exact in float32 whatever the
order of the reduction, so the reduced gradient is the same number however
the engine reduces; the rest (SGD with momentum) is the same torch code on
the same values in the same order, here and in the reference.

Usage: test_hvd_elastic.py shm|tcp"""
import binascii
import multiprocessing as mp
import os
import queue
import signal
import sys
import time

import hvd_harness

WORLD = 4
VICTIM = 3
KILL_AT = (1, 5)          # (epoch, batch) the victim dies before
EPOCHS, BATCHES, COMMIT_EVERY = 3, 8, 2


def gradients(rank, epoch, batch):
    """The integer gradients of the weight (3x5) and bias (3) on a rank."""
    import torch
    base = torch.arange(15, dtype=torch.float32).reshape(3, 5)
    weight = (base * (rank + 1) + 7 * epoch - 3 * batch) % 11 - 5
    bias = torch.tensor([rank - batch, epoch + rank, 2.0 - rank], dtype=torch.float32)
    return weight, bias


def train_batch(hvd, model, optimizer, state, errors):
    """One step of the elastic loop at (state.epoch, state.batch) on this
    rank; a HorovodInternalError is kept in `errors` (the test checks that it
    names the lost rank) and raised on, for hvd.elastic.run to recover."""
    w, b = gradients(hvd.rank(), state.epoch, state.batch)
    optimizer.zero_grad()
    loss = (model.weight * w).sum() + (model.bias * b).sum()
    try:
        loss.backward()
        optimizer.step()
    except hvd.HorovodInternalError as e:
        errors.append(str(e))
        raise


def make_model(seed):
    import torch
    torch.manual_seed(seed)
    return torch.nn.Linear(5, 3)


def make_optimizer(params):
    import torch
    return torch.optim.SGD(params, lr=0.125, momentum=0.5)


def worker(rank, uid_q, res_q):
    import zcomm
    import zcomm.torch as hvd
    try:
        if rank == 0:
            uid = zcomm.get_unique_id()
            for _ in range(WORLD - 1):
                uid_q.put(uid)
        else:
            uid = uid_q.get(timeout=60)
        hvd.init_rank(uid, WORLD, rank)
        model = make_model(seed=100 + rank)  # differs per rank: the first sync makes them equal
        optimizer = hvd.DistributedOptimizer(make_optimizer(model.parameters()),
                                             named_parameters=model.named_parameters(),
                                             op=hvd.Sum)
        state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
        schedule, errors, resets = [], [], []
        state.register_reset_callbacks([lambda: resets.append(hvd.size())])

        @hvd.elastic.run
        def train(state):
            schedule.append((state.epoch, state.batch, hvd.size()))
            while state.epoch < EPOCHS:
                while state.batch < BATCHES:
                    if rank == VICTIM and (state.epoch, state.batch) == KILL_AT:
                        os.kill(os.getpid(), signal.SIGKILL)
                    train_batch(hvd, model, optimizer, state, errors)
                    state.batch += 1
                    if state.batch % COMMIT_EVERY == 0:
                        state.commit()
                state.epoch, state.batch = state.epoch + 1, 0
                state.commit()

        train(state)
        params = [p.detach().numpy().tobytes() for p in model.parameters()]
        res_q.put((rank, "ok", dict(schedule=schedule, errors=errors, resets=resets,
                                    params=params, size=hvd.size(), hvd_rank=hvd.rank())))
        hvd.shutdown()
    except BaseException as e:
        import traceback
        res_q.put((rank, "error", "%r\n%s" % (e, traceback.format_exc())))


def reference(schedule):
    """The parameters of a run that follows `schedule` [(epoch, batch, size)
    at each (re)start], without failures: rank 0's initial model, the
    gradients summed over `size` ranks, from each entry to the next."""
    model = make_model(seed=100)
    optimizer = make_optimizer(model.parameters())
    starts = [(e, b) for e, b, _ in schedule] + [(EPOCHS, 0)]
    sizes = [n for _, _, n in schedule]
    step = 0
    for epoch in range(EPOCHS):
        for batch in range(BATCHES):
            while step + 1 < len(sizes) and (epoch, batch) >= starts[step + 1]:
                step += 1
            total_w, total_b = 0, 0
            for r in range(sizes[step]):
                w, b = gradients(r, epoch, batch)
                total_w, total_b = total_w + w, total_b + b
            optimizer.zero_grad()
            model.weight.grad, model.bias.grad = total_w.clone(), total_b.clone()
            optimizer.step()
    return [p.detach().numpy().tobytes() for p in model.parameters()]


def check_reference_params(results, schedule, fail):
    """For the zcrun-started workers' reports (parameters as hex strings):
    appends to fail unless every rank ends with the same parameters, bitwise
    those of reference(schedule)."""
    if len({tuple(r["params"]) for r in results}) != 1:
        fail.append("the ranks' parameters differ")
    elif [binascii.unhexlify(x) for x in results[0]["params"]] != reference(schedule):
        fail.append("parameters differ from the reference run of schedule %s" % (schedule,))


def main():
    hvd_harness.require_torch()
    transport = sys.argv[1] if len(sys.argv) > 1 else "shm"
    os.environ.update(ZC_TRANSPORT=transport, ZC_SOCKET_IFNAME="lo", ZC_TIMEOUT="60")
    ctx = mp.get_context("spawn")
    uid_q, res_q = ctx.Queue(), ctx.Queue()
    t0 = time.monotonic()
    procs = [ctx.Process(target=worker, args=(r, uid_q, res_q)) for r in range(WORLD)]
    for p in procs:
        p.start()
    results, deadline = {}, time.monotonic() + 150
    while len(results) < WORLD - 1 and time.monotonic() < deadline:
        try:
            rank, kind, value = res_q.get(timeout=0.5)
            results[rank] = (kind, value)
        except queue.Empty:
            if all(not p.is_alive() for p in procs):
                break
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    fail = []
    if procs[VICTIM].exitcode != -signal.SIGKILL:
        fail.append("rank %d exit code %s, not SIGKILL" % (VICTIM, procs[VICTIM].exitcode))
    survivors = [r for r in range(WORLD) if r != VICTIM]
    for r in survivors:
        if results.get(r, ("missing",))[0] != "ok":
            fail.append("rank %d: %s" % (r, results.get(r)))
    if fail:
        raise SystemExit("FAIL (%s): %s" % (transport, "\n".join(fail)))
    out = {r: results[r][1] for r in survivors}
    first = out[survivors[0]]
    for r in survivors:
        o = out[r]
        if o["schedule"] != first["schedule"]:
            fail.append("rank %d resumed at %s, rank %d at %s" % (r, o["schedule"], survivors[0],
                                                                  first["schedule"]))
        if o["params"] != first["params"]:
            fail.append("rank %d's parameters differ from rank %d's" % (r, survivors[0]))
        if (o["size"], o["hvd_rank"], o["resets"]) != (WORLD - 1, survivors.index(r), [WORLD - 1]):
            fail.append("rank %d: size %d, hvd.rank %d, resets %s after the loss"
                        % (r, o["size"], o["hvd_rank"], o["resets"]))
        # The cause: the lost peer (where this rank saw it go), or the alert
        # of the survivor that saw it (which may arrive first).
        if not o["errors"] or not all("peer %d lost" % VICTIM in e or
                                      ": aborted: " in e and "failed or aborted the job" in e
                                      for e in o["errors"]):
            fail.append("rank %d: HorovodInternalError names neither the lost rank %d nor the "
                        "alert: %s" % (r, VICTIM, o["errors"]))
    if not any("peer %d lost" % VICTIM in e for r in survivors for e in out[r]["errors"]):
        fail.append("no survivor's HorovodInternalError names the lost rank %d" % VICTIM)
    sched = first["schedule"]
    if len(sched) != 2 or sched[0] != (0, 0, WORLD) or sched[1][2] != WORLD - 1:
        fail.append("membership schedule %s: want a start on %d ranks, then one on %d"
                    % (sched, WORLD, WORLD - 1))
    # The last commit before the kill is the one before KILL_AT.
    last_commit = (KILL_AT[0], KILL_AT[1] - KILL_AT[1] % COMMIT_EVERY)
    if len(sched) == 2 and sched[1][:2] != last_commit:
        fail.append("resumed at %s, want the last commit %s" % (sched[1][:2], last_commit))
    if not fail and first["params"] != reference(sched):
        fail.append("parameters differ from the reference run of schedule %s" % (sched,))
    if fail:
        raise SystemExit("FAIL (%s): %s" % (transport, "\n".join(fail)))
    print("elastic DistributedOptimizer (%s): schedule %s, parameters bitwise equal to the "
          "reference on ranks %s; errors seen: %s (%.1f s)"
          % (transport, sched, survivors, first["errors"][0][:200], time.monotonic() - t0))


if __name__ == "__main__":
    main()
