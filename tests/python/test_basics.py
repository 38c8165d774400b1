"""The zcomm package in one process: version, enums that mirror zcomm.h,
zcomm.Error, a communicator of one (zc_init alone, and from a unique id),
output shapes of every call, the context manager, calls after finalize."""

import pickle
import sys

import zctest
from zctest import Checker

import numpy as np
import zcomm


def main():
    c = Checker(0, "basics")
    c.true(len(zcomm.version()) == 3 and zcomm.__version__ == "%d.%d.%d" % zcomm.version(),
           f"version {zcomm.version()}")
    c.true([s.name for s in zcomm.Status][:3] == ["OK", "INVALID_ARG", "MISMATCH"] and
           zcomm.Status.INTERNAL == 9, "Status mirrors zc_status")
    c.true(zcomm.Op.BXOR == 7 and zcomm.Dtype.BFLOAT16 == 7 and zcomm.Dtype.FLOAT64 == 9,
           "Op and Dtype mirror zcomm.h")
    c.true((zcomm.Dtype.INT16, zcomm.Dtype.UINT16, zcomm.Dtype.BOOL) == (10, 11, 12),
           "the appended dtypes keep zcomm.h's numbers")
    for name, t, dt in zctest.DTYPES:
        size = np.dtype(t).itemsize
        c.true(zcomm._zcomm.dtype_size(int(zcomm.Dtype[name.upper()])) == size,
               f"dtype_size({name}) == {size}")
    e = zcomm.Error(3, "rank 1: x: late")
    c.true(e.status is zcomm.Status.TIMEOUT and e.message == "rank 1: x: late", "Error fields")
    e2 = pickle.loads(pickle.dumps(e))
    c.true(type(e2) is zcomm.Error and e2.status == e.status and e2.message == e.message,
           "Error pickles")
    uid = zcomm.get_unique_id()
    c.true(isinstance(uid, bytes) and len(uid) == zcomm.UNIQUE_ID_BYTES == 128, "unique id")
    for comm in (zcomm.init(), zcomm.Communicator.from_unique_id(uid, 1, 0)):
        with comm:
            c.true((comm.rank, comm.size, comm.local_rank, comm.local_size) == (0, 1, 0, 1),
                   f"{comm}")
            x = np.arange(12, dtype=np.int32).reshape(3, 4)
            c.true(comm.allreduce(x) is x and (x == np.arange(12).reshape(3, 4)).all(),
                   "allreduce of one")
            c.true(comm.allgather(x).shape == (1, 3, 4), "allgather shape")
            c.true(comm.gather(x).shape == (1, 3, 4), "gather shape")
            c.true(comm.reduce_scatter(x).shape == (3, 4), "reduce_scatter shape")
            c.true(comm.scatter(x).shape == (3, 4), "scatter shape")
            c.true(comm.alltoall(x).shape == (3, 4), "alltoall shape")
            c.true(comm.reduce(x, op="max").shape == (3, 4), "reduce shape")
            c.true(comm.allgatherv(x.ravel(), [12]).shape == (12,), "allgatherv shape")
            c.true(comm.alltoallv(x.ravel(), [12], [12]).shape == (12,), "alltoallv shape")
            c.true(comm.allreduce(np.zeros(0, np.float16)).size == 0, "size 0")
            # One rank: int16/uint16 come back as they are; bool as 0 or 1
            # even from other true bytes (2, 0x80, 0xff), in place and not.
            for t in (np.int16, np.uint16):
                v = np.array([-3, 7, 300, 0], t)
                c.true(comm.allreduce(v.copy(), op="prod").tolist() == v.tolist(), f"{t} of one")
            raw = np.array([0, 1, 2, 0x80, 0xff, 0], np.uint8)
            for op in ("sum", "prod", "min", "max", "band", "bor", "bxor"):
                out = np.full(6, 7, np.uint8)
                comm.allreduce(raw.view(np.bool_), out.view(np.bool_), op=op)
                c.true(out.tolist() == [0, 1, 1, 1, 1, 0], f"bool {op} of one: {out.tolist()}")
                inplace = raw.copy()
                comm.reduce(inplace.view(np.bool_), out=inplace.view(np.bool_), op=op)
                c.true(inplace.tolist() == [0, 1, 1, 1, 1, 0], f"bool reduce {op} of one")
            moved = raw.copy()
            comm.broadcast(moved.view(np.bool_))
            c.true(moved.tolist() == raw.tolist(), "broadcast moves bool bytes as they are")
            c.true(comm.split(None) is None, "split(None)")
            d = comm.dup()
            c.true(d.allreduce(np.ones(2, np.uint64), op="prod").tolist() == [1, 1], "dup")
            d.finalize()
            d.finalize()  # twice is harmless
            try:
                d.barrier()
                c.fail("barrier after finalize was accepted")
            except zcomm.Error as err:
                c.true("finalized" in err.message, err.message)
            c.true(comm.async_error() is None, "healthy")
        c.true(comm.finalized, "the with block finalizes")
    print(f"{c.checks} checks passed", flush=True)


if __name__ == "__main__":
    sys.exit(main())
