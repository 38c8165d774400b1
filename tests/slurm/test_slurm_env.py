#!/usr/bin/python3
"""zcomm.torch.slurm_env: Slurm's host lists and tasks-per-node strings, and
the env:// variables derived from a task's environment (no cluster needed)."""
import sys
import unittest

from zcomm.torch import slurm_env as se

STEP = {"SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "3", "SLURM_PROCID": "5",
        "SLURM_STEP_NUM_TASKS": "7", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2),3", "SLURM_STEP_NODELIST": "gpu[07-09],cpu1"}


class FirstHost(unittest.TestCase):
    def test_forms(self):
        for nodelist, want in [("n1", "n1"), ("n[1-2]", "n1"), ("n[3-5,7],m1", "n3"),
                               ("a1,b[2-3]", "a1"), ("gpu[08-09]", "gpu08"),
                               ("rack[2-3]-gpu[08-09],x", "rack2-gpu08"), ("n[10]", "n10"),
                               ("node-a.example.org", "node-a.example.org")]:
            self.assertEqual(se.first_host(nodelist), want, nodelist)

    def test_malformed(self):
        for bad in ["", "n[", "n[1-2", "n]"]:
            with self.assertRaises(ValueError, msg=bad):
                se.first_host(bad)


class TasksOnNode(unittest.TestCase):
    def test_forms(self):
        self.assertEqual([se.tasks_on_node("2(x3),1", i) for i in range(4)], [2, 2, 2, 1])
        self.assertEqual(se.tasks_on_node("4", 0), 4)
        self.assertEqual([se.tasks_on_node("1,3,2", i) for i in range(3)], [1, 3, 2])

    def test_malformed(self):
        with self.assertRaises(ValueError):
            se.tasks_on_node("2(x3", 0)
        with self.assertRaises(ValueError):
            se.tasks_on_node("2(x2)", 2)


class FromSlurm(unittest.TestCase):
    def test_step(self):
        self.assertEqual(se.torch_env_from_slurm(dict(STEP)), {
            "RANK": "5", "WORLD_SIZE": "7", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "3",
            "MASTER_ADDR": "gpu07", "MASTER_PORT": str(10000 + 50 * 234 + 3)})

    def test_steps_of_a_job_differ_in_port(self):
        a = se.torch_env_from_slurm(dict(STEP, SLURM_STEP_ID="0"))["MASTER_PORT"]
        b = se.torch_env_from_slurm(dict(STEP, SLURM_STEP_ID="1"))["MASTER_PORT"]
        self.assertNotEqual(a, b)

    def test_kept_when_set(self):
        env = dict(STEP, MASTER_ADDR="head", MASTER_PORT="29500")
        add = se.fill_from_slurm(env)
        self.assertNotIn("MASTER_ADDR", add)
        self.assertEqual((env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"]), ("head", "29500", "5"))

    def test_nothing_outside_a_step(self):
        batch = {k: v for k, v in STEP.items() if k != "SLURM_STEP_ID"}  # a batch script itself
        self.assertEqual(se.torch_env_from_slurm(batch), {})
        self.assertEqual(se.torch_env_from_slurm({}), {})
        self.assertEqual(se.torch_env_from_slurm(dict(STEP, RANK="0")), {})  # zcrun, torchrun


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
