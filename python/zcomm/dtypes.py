"""Reduction ops and element types of the C ABI, and how numpy arrays map
onto them."""

import enum

import numpy as np

from .errors import DtypeError, Status, invalid


class Op(enum.IntEnum):
    """zc_op. AVG is for floating types; BAND, BOR and BXOR for integers and
    bool."""

    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
    BAND = 5
    BOR = 6
    BXOR = 7


class Dtype(enum.IntEnum):
    """zc_dtype. float16 and bfloat16 travel as 16-bit words. BOOL is one
    byte (numpy's bool_); its reductions are logical (sum and max: or; prod
    and min: and) and write 0 or 1."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9
    INT16 = 10
    UINT16 = 11
    BOOL = 12


# numpy (kind, itemsize) -> zc_dtype; bfloat16 has no numpy type of its own.
_BY_KIND = {
    ("i", 1): Dtype.INT8, ("u", 1): Dtype.UINT8,
    ("i", 2): Dtype.INT16, ("u", 2): Dtype.UINT16,
    ("b", 1): Dtype.BOOL,
    ("i", 4): Dtype.INT32, ("u", 4): Dtype.UINT32,
    ("i", 8): Dtype.INT64, ("u", 8): Dtype.UINT64,
    ("f", 2): Dtype.FLOAT16, ("f", 4): Dtype.FLOAT32, ("f", 8): Dtype.FLOAT64,
}
SUPPORTED = ("int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool, "
             "float16, float32, float64, and bfloat16 as a uint16 array with "
             "dtype='bfloat16'")


def parse_op(op, rank, name):
    """An :class:`Op` from an Op, its value, or its name ("sum", "BXOR")."""
    if isinstance(op, str):
        try:
            return Op[op.upper()]
        except KeyError:
            pass
    elif isinstance(op, (int, np.integer)) and not isinstance(op, bool):
        try:
            return Op(int(op))
        except ValueError:
            pass
    raise invalid(rank, name, f"unknown op {op!r} (one of "
                  f"{', '.join(o.name.lower() for o in Op)})")


def _named(dtype, rank, name):
    if isinstance(dtype, Dtype):
        return dtype
    if isinstance(dtype, str):
        try:
            return Dtype[dtype.upper()]
        except KeyError:
            pass
    raise DtypeError(Status.INVALID_ARG,
                     f"rank {rank}: {name}: unknown dtype {dtype!r} (supported: {SUPPORTED})")


def zc_dtype(array, dtype, rank, name):
    """The zc_dtype of `array` (a numpy array); `dtype` (a name or Dtype)
    overrides it where numpy cannot say it, e.g. bfloat16 in a uint16 array."""
    dt = array.dtype
    if dtype is not None:
        want = _named(dtype, rank, name)
        if want == Dtype.BFLOAT16:
            if dt.kind == "u" and dt.itemsize == 2 or dt.name == "bfloat16":
                return want
            raise DtypeError(Status.INVALID_ARG,
                             f"rank {rank}: {name}: dtype='bfloat16' needs a uint16 array "
                             f"holding bfloat16 words, got {dt}")
        got = zc_dtype(array, None, rank, name)
        if got != want:
            raise DtypeError(Status.INVALID_ARG,
                             f"rank {rank}: {name}: dtype={want.name.lower()} given for an "
                             f"array of {dt}")
        return want
    if dt.name == "bfloat16":  # e.g. ml_dtypes.bfloat16
        return Dtype.BFLOAT16
    found = _BY_KIND.get((dt.kind, dt.itemsize))
    if found is None or dt.fields is not None or dt.subdtype is not None:
        raise DtypeError(Status.INVALID_ARG,
                         f"rank {rank}: {name}: unsupported dtype {dt} (supported: {SUPPORTED})")
    return found
