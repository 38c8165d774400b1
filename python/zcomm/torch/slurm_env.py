"""torch.distributed's env:// variables from Slurm's, for tasks that srun
started (docs/torch.md, "Under Slurm").

torch's env:// reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which
zcrun sets and srun does not. `import zcomm.torch` calls
:func:`fill_from_slurm`, which, in a task of an srun step (SLURM_STEP_ID,
SLURM_PROCID and SLURM_STEP_NUM_TASKS set) where RANK is not set, derives:

=================== ===================================================
RANK                SLURM_PROCID
WORLD_SIZE          SLURM_STEP_NUM_TASKS
LOCAL_RANK          SLURM_LOCALID
LOCAL_WORLD_SIZE    this node's entry of SLURM_STEP_TASKS_PER_NODE
MASTER_ADDR         the first host of SLURM_STEP_NODELIST (where srun puts
                    task 0 unless told otherwise)
MASTER_PORT         10000 + 50 * (SLURM_JOB_ID mod 1000) + SLURM_STEP_ID
                    mod 50: the same on every task of the step, different
                    for the steps of one job
=================== ===================================================

Variables already set are kept (set MASTER_PORT where that port is taken).
Outside an srun step (a batch script itself, zcrun, mpirun) nothing changes.
"""
import os
import re

__all__ = ["first_host", "tasks_on_node", "torch_env_from_slurm", "fill_from_slurm"]


def first_host(nodelist):
    """The first host of a Slurm host list: "n[3-5,7],m1" -> "n3",
    "rack[2-3]-gpu[08-09]" -> "rack2-gpu08" (zero padding kept)."""
    depth = 0
    end = len(nodelist)
    for i, ch in enumerate(nodelist):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            end = i
            break
    first = nodelist[:end]
    # Each bracket group: its first number (the start of its first range).
    out = re.sub(r"\[([0-9]+)[^\]]*\]", lambda m: m.group(1), first)
    if not out or "[" in out or "]" in out:
        raise ValueError("cannot read Slurm host list %r" % nodelist)
    return out


def tasks_on_node(tasks_per_node, node_index):
    """The task count of node node_index in a Slurm tasks-per-node string:
    "2(x3),1" is 2, 2, 2, 1."""
    i = 0
    for part in tasks_per_node.split(","):
        m = re.fullmatch(r"([0-9]+)(?:\(x([0-9]+)\))?", part.strip())
        if not m:
            raise ValueError("cannot read Slurm tasks per node %r" % tasks_per_node)
        count, repeat = int(m.group(1)), int(m.group(2) or 1)
        if node_index < i + repeat:
            return count
        i += repeat
    raise ValueError("node %d beyond Slurm tasks per node %r" % (node_index, tasks_per_node))


def torch_env_from_slurm(environ):
    """The variables to add to environ (a dict); empty outside an srun step
    or where RANK is already set."""
    need = ("SLURM_STEP_ID", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_JOB_ID")
    if "RANK" in environ or any(k not in environ for k in need):
        return {}
    derived = {
        "RANK": environ["SLURM_PROCID"],
        "WORLD_SIZE": environ["SLURM_STEP_NUM_TASKS"],
    }
    if "SLURM_LOCALID" in environ:
        derived["LOCAL_RANK"] = environ["SLURM_LOCALID"]
    if "SLURM_STEP_TASKS_PER_NODE" in environ and "SLURM_NODEID" in environ:
        derived["LOCAL_WORLD_SIZE"] = str(tasks_on_node(environ["SLURM_STEP_TASKS_PER_NODE"],
                                                        int(environ["SLURM_NODEID"])))
    nodes = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST")
    if nodes:
        derived["MASTER_ADDR"] = first_host(nodes)
    job, step = int(environ["SLURM_JOB_ID"]), int(environ["SLURM_STEP_ID"])
    derived["MASTER_PORT"] = str(10000 + 50 * (job % 1000) + step % 50)
    return {k: v for k, v in derived.items() if k not in environ}


def fill_from_slurm(environ=None):
    """Adds torch_env_from_slurm's variables to environ (default os.environ);
    returns them."""
    environ = os.environ if environ is None else environ
    add = torch_env_from_slurm(environ)
    environ.update(add)
    return add
