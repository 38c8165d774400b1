"""DistributedOptimizer on zcomm's engine (hvd_train_worker.py): parameters
identical across ranks and equal to single-process training on the
concatenated batch; SGD and Adam, fp16 compression, two backward passes per
step, join with uneven batches; 2 to 4 ranks under zcrun and 2 under mpirun."""
import hvd_harness as h


def main():
    h.require_torch()
    for n, mode in ((2, "sgd"), (4, "sgd"), (3, "adam"), (2, "fp16"), (2, "bpps2"),
                    (3, "join"), (4, "join")):
        rc, out = h.zcrun(n, "hvd_train_worker.py", [mode])
        h.expect_ok("zcrun -np %d %s" % (n, mode), n, rc, out)
    if h.have_mpirun():
        rc, out = h.mpirun(2, "hvd_train_worker.py", ["sgd"])
        h.expect_ok("mpirun -np 2 sgd", 2, rc, out)
    else:
        print("mpirun not found: the mpirun case did not run")
    print("OK")


if __name__ == "__main__":
    main()
