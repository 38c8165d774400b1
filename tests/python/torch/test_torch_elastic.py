"""torch.distributed on zcomm in an elastic job's life: in one process,
destroy_process_group() then init_process_group("zcomm", ...) again (what an
elastic agent does between rendezvous rounds), twice; then a rank is killed
in a loop of all_reduce, and the survivors destroy the broken group and
build a new one of their own (a fresh store), whose results are exact."""
import os
import signal
import tempfile

import zc_torch_harness as h

WORLD = 3
VICTIM = 2


def body(rank, world, tmp):
    import datetime
    import torch
    import torch.distributed as dist
    timeout = datetime.timedelta(seconds=60)
    # The group the harness made, then two more in the same process.
    for round_ in range(3):
        t = torch.full((5,), float(rank + round_))
        dist.all_reduce(t)
        want = sum(r + round_ for r in range(world))
        assert (t == want).all(), f"round {round_}: {t} != {want}"
        dist.destroy_process_group()
        dist.init_process_group("zcomm", init_method="file://" + os.path.join(tmp, f"round{round_}"),
                                rank=rank, world_size=world, timeout=timeout)
    # A rank dies: the survivors see a RuntimeError, then rebuild.
    err = None
    for i in range(100000):
        if rank == VICTIM and i == 10:
            os.kill(os.getpid(), signal.SIGKILL)
        t = torch.full((1000,), float(rank * i))
        try:
            dist.all_reduce(t)
        except RuntimeError as e:
            err = str(e)
            break
    assert err and "zcomm" in err, err
    dist.destroy_process_group()
    survivors = [r for r in range(world) if r != VICTIM]
    new_rank = survivors.index(rank)
    dist.init_process_group("zcomm", init_method="file://" + os.path.join(tmp, "survivors"),
                            rank=new_rank, world_size=len(survivors), timeout=timeout)
    assert dist.get_world_size() == len(survivors) and dist.get_rank() == new_rank
    t = torch.arange(7, dtype=torch.float64) * (rank + 1)
    dist.all_reduce(t)
    want = torch.arange(7, dtype=torch.float64) * sum(r + 1 for r in survivors)
    assert torch.equal(t, want), f"{t} != {want}"
    return {"error": err[:200]}


def main():
    h.require_torch()
    with tempfile.TemporaryDirectory() as tmp:
        results = h.run(body, WORLD, tmp, init="tcp", timeout=150, may_die=(VICTIM,))
    assert results[VICTIM] is None, results[VICTIM]
    for r in range(WORLD):
        if r != VICTIM:
            print(f"rank {r}: {results[r]}", flush=True)
    print("OK")


if __name__ == "__main__":
    main()
