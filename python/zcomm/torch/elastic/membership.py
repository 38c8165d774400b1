"""How hvd.elastic.run changes the ranks of the job on zcomm.

After a HorovodInternalError (a lost rank), the live ranks shrink the job's
communicator (zc_comm_shrink: no new rendezvous, connections reused) and
start the engine on it, renumbered in order. When newcomers wait to join
(zcrun --elastic starts them), the ranks agree at a commit and grow the
communicator to include them (zc_comm_grow), the newcomers joining
(zc_comm_join) from hvd.init(). docs/elastic.md."""
import torch

from .. import mpi_ops
from ..mpi_ops import _eng


def newcomers_waiting():
    """How many newcomers wait to join, the same on every rank: the fewest
    any rank sees (zc_comm_join_pending is this rank's own view of the
    store; a grow admits every newcomer waiting when it starts).
    Collective."""
    mine = torch.tensor([_eng.join_pending()], dtype=torch.int64)
    return int(mpi_ops.allreduce(mine, op=mpi_ops.Min, name="zcomm.elastic.join_pending")[0])


def reset(grow):
    """Rebuilds the engine on the new set of ranks: the live ranks after a
    failure (grow False), or these plus the waiting newcomers (grow True).
    Collective over the live ranks (and the newcomers)."""
    if grow:
        mpi_ops._forget_engine()
        _eng.grow()
        mpi_ops.global_process_set.ranks = list(range(_eng.size()))
    else:
        mpi_ops._shrink()
