"""A rank of test_hvd_elastic_host_removed.py under zcrun --elastic -np 4
-H localhost:3,gone:1 with a discovery script: trains as test_hvd_elastic.py's
ranks do; at the commit REMOVE_AT every rank waits (small allreduces, with a
deadline) while rank 0 makes the script drop host "gone"; zcrun stops rank 3
there (SIGTERM); the others get HorovodInternalError, roll back to that
commit, shrink to 3 ranks and finish. Each process that finishes prints
RESULT <json>."""
import binascii
import json
import os
import time

import test_hvd_elastic as base

REMOVE_AT = (1, base.COMMIT_EVERY)  # (epoch, batch) of the commit the host goes at
WAIT_S = 60


def main():
    import torch
    import zcomm.torch as hvd
    hvd.init()
    model = base.make_model(seed=100 + hvd.rank())
    optimizer = hvd.DistributedOptimizer(base.make_optimizer(model.parameters()),
                                         named_parameters=model.named_parameters(), op=hvd.Sum)
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    schedule, errors = [], []

    def wait_for_the_host_to_go():
        if hvd.rank() == 0:
            open(os.environ["HOST_GONE_TRIGGER"], "w").close()
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                hvd.allreduce(torch.zeros(1), name="test.wait_for_the_host_to_go")
            except hvd.HorovodInternalError as e:
                errors.append(str(e))
                raise
            assert time.monotonic() < deadline, "host gone still in the job after %d s" % WAIT_S
            time.sleep(0.05)  # zcrun asks the script every second; the deadline bounds it

    @hvd.elastic.run
    def train(state):
        schedule.append((state.epoch, state.batch, hvd.size()))
        while state.epoch < base.EPOCHS:
            while state.batch < base.BATCHES:
                base.train_batch(hvd, model, optimizer, state, errors)
                state.batch += 1
                if state.batch % base.COMMIT_EVERY == 0:
                    state.commit()
                    if (state.epoch, state.batch) == REMOVE_AT and hvd.size() == base.WORLD:
                        wait_for_the_host_to_go()
            state.epoch, state.batch = state.epoch + 1, 0
            state.commit()

    train(state)
    params = [binascii.hexlify(p.detach().numpy().tobytes()).decode()
              for p in model.parameters()]
    print("RESULT " + json.dumps(dict(rank=hvd.rank(), size=hvd.size(), schedule=schedule,
                                      errors=errors, params=params)), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
