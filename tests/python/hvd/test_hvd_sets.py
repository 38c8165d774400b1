"""zcomm.torch's Horovod process sets, grouped allgather/reducescatter,
sparse allreduce and the DistributedOptimizer's groups, sparse gradients
and process sets (hvd_sets_worker.py) on 1 to 4 ranks under zcrun, over
shared memory and tcp."""
import hvd_harness as h


def main():
    h.require_torch()
    for n, transport in ((1, "shm"), (2, "shm"), (3, "tcp"), (4, "shm")):
        rc, out = h.zcrun(n, "hvd_sets_worker.py", env={"ZC_TRANSPORT": transport})
        h.expect_ok("zcrun -np %d sets (%s)" % (n, transport), n, rc, out)
    print("OK")


if __name__ == "__main__":
    main()
