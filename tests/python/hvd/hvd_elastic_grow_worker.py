"""A rank of test_hvd_elastic_grow.py under zcrun --elastic -np 4 --min-np 3
--max-np 4: trains as test_hvd_elastic.py's ranks do; the rank started as
3 kills itself in the middle of epoch 1; zcrun starts a replacement (a
joiner: hvd.init() joins the running job); the survivors wait for it at
the start of epoch 2 (check_host_updates until HostsUpdatedInterrupt, with a
deadline), grow, sync the state to it and finish on 4 ranks. Each process
that finishes prints RESULT <json>."""
import binascii
import json
import os
import signal
import time

import test_hvd_elastic as base

GROW_AT_EPOCH = 2
WAIT_S = 150


def main():
    import zcomm.torch as hvd
    joiner = os.environ.get("ZC_JOIN") == "1"
    victim = not joiner and os.environ.get("ZC_RANK") == str(base.VICTIM)
    hvd.init()
    model = base.make_model(seed=100 + hvd.rank())
    optimizer = hvd.DistributedOptimizer(base.make_optimizer(model.parameters()),
                                         named_parameters=model.named_parameters(), op=hvd.Sum)
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    schedule, errors, interrupts = [], [], []

    def wait_for_the_replacement():
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                state.check_host_updates()
            except hvd.HostsUpdatedInterrupt as e:
                interrupts.append(e.skip_sync)
                raise
            assert time.monotonic() < deadline, "no replacement joined in %d s" % WAIT_S
            time.sleep(0.05)  # polls the job's store; the deadline bounds it

    @hvd.elastic.run
    def train(state):
        schedule.append((state.epoch, state.batch, hvd.size()))
        while state.epoch < base.EPOCHS:
            while state.batch < base.BATCHES:
                if victim and (state.epoch, state.batch) == base.KILL_AT:
                    os.kill(os.getpid(), signal.SIGKILL)
                base.train_batch(hvd, model, optimizer, state, errors)
                state.batch += 1
                if state.batch % base.COMMIT_EVERY == 0:
                    state.commit()
            state.epoch, state.batch = state.epoch + 1, 0
            state.commit()
            if state.epoch == GROW_AT_EPOCH and hvd.size() < base.WORLD:
                wait_for_the_replacement()

    train(state)
    params = [binascii.hexlify(p.detach().numpy().tobytes()).decode()
              for p in model.parameters()]
    print("RESULT " + json.dumps(dict(joiner=joiner, rank=hvd.rank(), size=hvd.size(),
                                      schedule=schedule, errors=errors, interrupts=interrupts,
                                      params=params)), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
