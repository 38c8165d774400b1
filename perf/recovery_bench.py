#!/usr/bin/python3
"""recovery_bench.py: how long a training job is without a completed step
when one of its ranks is killed (SIGKILL), two ways, on 4 ranks:

  shrink   hvd.elastic.run (zcomm.torch.elastic): the survivors roll back
           to their last in-memory commit, shrink to 3 ranks, restart the
           engine, sync, and train on. Ranks started from a unique id
           (spawned processes), as an elastic launcher would.
  restart  what users have without it: zcrun ends the job when the rank
           dies, the job is started again (zcrun -np 3) and reloads its last
           checkpoint from disk (torch.save / torch.load of the model and
           optimizer), broadcasts it, and trains.

Time measured: from the moment the victim kills itself (time.monotonic()
just before os.kill(SIGKILL); the clock is the same for every process of
the machine) to the end of the first training step that completes after it
on every survivor (shrink) / on rank 0 of the new job (restart). For
shrink, the phases too, each from the kill: detected (the survivors'
HorovodInternalError, when run() calls state.restore()), restored (the
rollback to the last commit done), reset (shrink and engine restart done),
synced (rank 0's state broadcast), step (the first step completed after);
and a training step's time before the loss for scale. Models (--models),
MLPs trained with DistributedOptimizer and SGD, commit / checkpoint every 5
steps, the victim dies before step 12:

  small   3 x (256 x 256), batch 32, momentum 0.9: 0.2 M parameters
  medium  3 x (1024 x 1024), batch 32, momentum 0.9: 12 MiB of parameters,
          a 24 MiB checkpoint
  large   8 x (3584 x 3584), batch 8, no momentum: 103 M parameters, a
          411 MB checkpoint

    recovery_bench.py --json out.json [--rounds 3] [--transports shm,tcp]
                      [--models small,medium,large]

Prints, per transport, min / median / max of each over the rounds and the
ratio of the medians (restart / shrink). Loopback only (ZC_SOCKET_IFNAME=lo).
"""
import argparse
import json
import multiprocessing as mp
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import time

RANKS = 4
VICTIM = 3
KILL_STEP = 12
COMMIT_EVERY = 5
STEPS = 16
HERE = os.path.dirname(os.path.abspath(__file__))


# name: (layers, width, batch, SGD momentum)
MODELS = {"small": (3, 256, 32, 0.9), "medium": (3, 1024, 32, 0.9), "large": (8, 3584, 8, 0.0)}


def describe_model(name):
    layers, width, batch, momentum = MODELS[name]
    params = layers * (width * width + width)
    return ("mlp %d x %d x %d float32, %.1f M parameters, batch %d, momentum %g"
            % (layers, width, width, params / 1e6, batch, momentum))


def build_model(name):
    import torch
    layers, width, _, _ = MODELS[name]
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods)


def train_step(model, optimizer, batch):
    optimizer.zero_grad()
    model(batch).pow(2).mean().backward()
    optimizer.step()


def make_training(hvd, name):
    import torch
    _, width, batch_size, momentum = MODELS[name]
    model = build_model(name)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3,
                                                         momentum=momentum),
                                         named_parameters=model.named_parameters())
    batch = torch.randn(batch_size, width, generator=torch.Generator().manual_seed(hvd.rank()))
    return model, optimizer, batch


# ---- shrink: hvd.elastic.run ------------------------------------------------

def shrink_rank(rank, uid_q, res_q, kill_time, model_name):
    import zcomm
    import zcomm.torch as hvd
    try:
        if rank == 0:
            uid = zcomm.get_unique_id()
            for _ in range(RANKS - 1):
                uid_q.put(uid)
        else:
            uid = uid_q.get(timeout=120)
        hvd.init_rank(uid, RANKS, rank)
        model, optimizer, batch = make_training(hvd, model_name)
        state = hvd.elastic.TorchState(model, optimizer, step=0)
        # When each phase of the recovery ended: detect (run() caught the
        # HorovodInternalError and restores), restore, reset (shrink,
        # engine restarted), sync (train entered again), step.
        marks = {}
        restore = state.restore

        def timed_restore():
            marks.setdefault("detect", time.monotonic())
            restore()
            marks.setdefault("restore", time.monotonic())
        state.restore = timed_restore
        state.register_reset_callbacks([lambda: marks.setdefault("reset", time.monotonic())])
        steps = []

        @hvd.elastic.run
        def train(state):
            if "reset" in marks:
                marks.setdefault("sync", time.monotonic())
            while state.step < STEPS:
                if rank == VICTIM and state.step == KILL_STEP:
                    kill_time.value = time.monotonic()
                    os.kill(os.getpid(), signal.SIGKILL)
                t0 = time.monotonic()
                train_step(model, optimizer, batch)
                if "sync" in marks:
                    marks.setdefault("step", time.monotonic())
                else:
                    steps.append(time.monotonic() - t0)
                state.step += 1
                if state.step % COMMIT_EVERY == 0:
                    state.commit()

        train(state)
        marks["step_before"] = statistics.median(steps[1:] or steps)
        res_q.put((rank, "ok", marks if "step" in marks else None, hvd.size()))
        hvd.shutdown()
    except BaseException as e:  # reported to the driver
        res_q.put((rank, "error", repr(e), 0))


def shrink_round(timeout, model_name):
    ctx = mp.get_context("spawn")
    uid_q, res_q = ctx.Queue(), ctx.Queue()
    kill_time = ctx.Value("d", 0.0)
    procs = [ctx.Process(target=shrink_rank, args=(r, uid_q, res_q, kill_time, model_name))
             for r in range(RANKS)]
    for p in procs:
        p.start()
    got, deadline = {}, time.monotonic() + timeout
    try:
        while len(got) < RANKS - 1 and time.monotonic() < deadline:
            try:
                r, kind, value, size = res_q.get(timeout=0.5)
                got[r] = (kind, value, size)
            except queue.Empty:
                if all(not p.is_alive() for p in procs):
                    break
    finally:
        for p in procs:
            p.join(max(0.0, min(30.0, deadline - time.monotonic())))
            if p.is_alive():
                p.kill()
                p.join()
    bad = {r: v for r, v in got.items() if v[0] != "ok" or v[1] is None or v[2] != RANKS - 1}
    if bad or len(got) != RANKS - 1 or kill_time.value == 0.0:
        raise RuntimeError("shrink round failed: %s (kill recorded: %s)"
                           % (got, kill_time.value != 0.0))
    # Each phase ends when the last survivor ends it.
    phases = {k: max(v[1][k] for v in got.values()) - kill_time.value
              for k in ("detect", "restore", "reset", "sync", "step")}
    phases["step_before"] = statistics.median(v[1]["step_before"] for v in got.values())
    return phases


# ---- restart: zcrun again and a checkpoint from disk --------------------------

def restart_worker(args):
    import torch
    import zcomm.torch as hvd
    hvd.init()
    model, optimizer, batch = make_training(hvd, args.model)
    ckpt = os.path.join(args.dir, "checkpoint.pt")
    if args.worker == "resume":
        start = 0
        if hvd.rank() == 0:
            saved = torch.load(ckpt)
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            start = saved["step"]
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        hvd.broadcast_object(start, root_rank=0)
        train_step(model, optimizer, batch)
        if hvd.rank() == 0:
            with open(os.path.join(args.dir, "resumed"), "w") as f:
                f.write(repr(time.monotonic()))
        hvd.shutdown()
        return
    for step in range(STEPS):
        if hvd.rank() == VICTIM and step == KILL_STEP:
            with open(os.path.join(args.dir, "killed"), "w") as f:
                f.write(repr(time.monotonic()))
            os.kill(os.getpid(), signal.SIGKILL)
        train_step(model, optimizer, batch)
        if (step + 1) % COMMIT_EVERY == 0 and hvd.rank() == 0:
            torch.save(dict(model=model.state_dict(), optimizer=optimizer.state_dict(),
                            step=step + 1), ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)  # a whole checkpoint or the last one
    hvd.shutdown()


def restart_round(zcrun, timeout, model_name):
    with tempfile.TemporaryDirectory(prefix="zc_recovery_") as d:
        base = [zcrun, "--timeout", str(int(timeout)), "-np"]
        me = [sys.executable, os.path.abspath(__file__), "--dir", d, "--model", model_name,
              "--worker"]
        first = subprocess.run(base + [str(RANKS)] + me + ["train"], capture_output=True,
                               text=True, timeout=timeout + 30)
        if first.returncode == 0 or not os.path.exists(os.path.join(d, "killed")):
            raise RuntimeError("restart round: the first job did not lose its rank (exit %d): %s"
                               % (first.returncode, first.stdout[-2000:] + first.stderr[-2000:]))
        second = subprocess.run(base + [str(RANKS - 1)] + me + ["resume"], capture_output=True,
                                text=True, timeout=timeout + 30)
        if second.returncode != 0:
            raise RuntimeError("restart round: the restarted job failed (exit %d): %s"
                               % (second.returncode, second.stdout[-2000:] + second.stderr[-2000:]))
        with open(os.path.join(d, "killed")) as f:
            killed = float(f.read())
        with open(os.path.join(d, "resumed")) as f:
            resumed = float(f.read())
        return resumed - killed


def mmm(xs):
    return [min(xs), statistics.median(xs), max(xs)]


def measure(zcrun, args, model, transport):
    """Alternating rounds of shrink and restart; the row of the results."""
    shrink, restart, phases = [], [], []
    for rnd in range(args.rounds):  # alternating, so that load drifts hit both
        phases.append(shrink_round(args.timeout, model))
        shrink.append(phases[-1]["step"])
        restart.append(restart_round(zcrun, args.timeout, model))
        ph = {k: v * 1e3 for k, v in phases[-1].items()}
        print("recovery %s %s round %d: shrink %.1f ms (detected at %.1f ms, restored %.1f, "
              "shrunk and engine restarted %.1f, synced %.1f; a step before the loss %.1f ms), "
              "restart %.1f ms"
              % (model, transport, rnd, shrink[-1] * 1e3, ph["detect"], ph["restore"], ph["reset"],
                 ph["sync"], ph["step_before"], restart[-1] * 1e3), flush=True)
    row = dict(shrink_ms=[x * 1e3 for x in shrink], restart_ms=[x * 1e3 for x in restart],
               phases_ms=[{k: v * 1e3 for k, v in ph.items()} for ph in phases])
    row["ratio"] = statistics.median(restart) / statistics.median(shrink)
    s, r = mmm(row["shrink_ms"]), mmm(row["restart_ms"])
    for what, t in (("shrink", s), ("restart", r)):
        print("recovery %s %s %d ranks %s ms: min %.1f median %.1f max %.1f"
              % ((model, transport, RANKS, what) + tuple(t)))
    print("recovery %s %s restart / shrink (medians): %.1f" % (model, transport, row["ratio"]),
          flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--transports", default="shm,tcp")
    ap.add_argument("--models", default="medium",
                    help="comma-separated: " + ", ".join(MODELS) + " (see the module's text)")
    ap.add_argument("--model", default="medium", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=180, help="seconds per job")
    ap.add_argument("--zcrun", default=None, help="zcrun (default: $ZCRUN or "
                    "../build/launcher/zcrun)")
    ap.add_argument("--worker", choices=["train", "resume"], help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ["ZC_SOCKET_IFNAME"] = "lo"
    if args.worker:
        restart_worker(args)
        return 0
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: torch is not installed")
        return 77
    zcrun = args.zcrun or os.environ.get("ZCRUN") or os.path.join(HERE, "..", "build", "launcher",
                                                                   "zcrun")
    os.environ.setdefault("ZC_TIMEOUT", "60")
    models = args.models.split(",")
    for m in models:
        if m not in MODELS:
            ap.error("unknown model %r (one of %s)" % (m, ", ".join(MODELS)))
    results = dict(ranks=RANKS, rounds=args.rounds, kill_step=KILL_STEP,
                   commit_every=COMMIT_EVERY, loadavg_start=os.getloadavg(), models={},
                   complete=False)
    for model in models:
        entry = results["models"][model] = dict(model=describe_model(model), transports={})
        # The first model's figures stay where run_suite and the plot read them.
        if model == models[0]:
            results["model"] = entry["model"]
            results["transports"] = entry["transports"]
        for transport in args.transports.split(","):
            os.environ["ZC_TRANSPORT"] = transport
            entry["transports"][transport] = measure(zcrun, args, model, transport)
    results["complete"] = True
    results["loadavg_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
