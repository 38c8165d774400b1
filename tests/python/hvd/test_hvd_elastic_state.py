"""Unit tests of hvd.elastic's state objects on one rank (hvd.init() with no
launcher): commit / restore / sync of TorchState and ObjectState, reset
callbacks, run()'s retry after HorovodInternalError and HostsUpdatedInterrupt,
ElasticSampler's partitions before and after the ranks change, and the
exceptions' names where Horovod users import them."""
import unittest

import hvd_harness


class ElasticState(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import zcomm.torch as hvd
        hvd.init()
        cls.hvd = hvd

    @classmethod
    def tearDownClass(cls):
        cls.hvd.shutdown()

    def _model_and_optimizer(self):
        import torch
        torch.manual_seed(1)
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        return model, opt

    def _train_step(self, model, opt):
        opt.zero_grad()
        model(self.x).pow(2).sum().backward()
        opt.step()

    def setUp(self):
        import torch
        self.x = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7

    def test_torch_state_restore_returns_to_the_commit(self):
        import torch
        model, opt = self._model_and_optimizer()
        state = self.hvd.elastic.TorchState(model, opt, epoch=0, batch=3)
        self._train_step(model, opt)
        state.batch = 4
        state.commit()
        committed = {k: v.clone() for k, v in model.state_dict().items()}
        momentum = {k: v["momentum_buffer"].clone() for k, v in opt.state_dict()["state"].items()}
        for _ in range(3):
            self._train_step(model, opt)
        state.batch, state.epoch = 9, 2
        self.assertFalse(torch.equal(model.weight, committed["weight"]))
        state.restore()
        for k, v in model.state_dict().items():
            self.assertTrue(torch.equal(v, committed[k]), k)
        for k, v in opt.state_dict()["state"].items():
            self.assertTrue(torch.equal(v["momentum_buffer"], momentum[k]), k)
        self.assertEqual((state.epoch, state.batch), (0, 4))
        self.assertIs(state.model, model)
        self.assertIs(state.optimizer, opt)

    def test_restore_before_any_commit_returns_to_the_start(self):
        import torch
        model, opt = self._model_and_optimizer()
        start = model.weight.detach().clone()
        state = self.hvd.elastic.TorchState(model=model, optimizer=opt, lr=[0.5])
        self._train_step(model, opt)
        state.lr.append(1)  # the committed copy is a separate object only after save()
        state.lr = [2]
        state.restore()
        self.assertTrue(torch.equal(model.weight, start))
        self.assertEqual(state.lr, [0.5, 1])

    def test_sync_keeps_one_rank_state_and_loads_the_committed_objects(self):
        import torch
        model, opt = self._model_and_optimizer()
        state = self.hvd.elastic.TorchState(model, opt, step=5)
        self._train_step(model, opt)
        live = model.weight.detach().clone()
        state.step = 6
        state.sync()  # one rank: parameters unchanged, plain objects from the commit
        self.assertTrue(torch.equal(model.weight, live))
        self.assertEqual(state.step, 5)

    def test_assigning_a_new_model_commits_it(self):
        import torch
        model, opt = self._model_and_optimizer()
        state = self.hvd.elastic.TorchState(model, opt)
        other = torch.nn.Linear(4, 2)
        assigned = other.weight.detach().clone()
        state.model = other
        with torch.no_grad():
            other.weight.add_(1)
        state.restore()
        self.assertIs(state.model, other)
        self.assertTrue(torch.equal(other.weight, assigned))

    def test_object_state(self):
        calls = []
        state = self.hvd.elastic.ObjectState(bcast_object=lambda o: (calls.append(o), o)[1],
                                             get_rank=self.hvd.rank, a=1, b="x")
        state.a, state.b = 2, "y"
        state.restore()
        self.assertEqual((state.a, state.b), (1, "x"))
        state.a = 3
        state.commit()
        state.a = 4
        state.sync()
        self.assertEqual(state.a, 3)
        self.assertEqual(calls, [{"a": 3, "b": "x"}])

    def test_run_retries_after_internal_error_from_the_last_commit(self):
        hvd = self.hvd
        state = hvd.elastic.ObjectState(bcast_object=hvd.broadcast_object, get_rank=hvd.rank,
                                        n=0)
        resets, starts = [], []
        state.register_reset_callbacks([lambda: resets.append(hvd.size())])
        orig = hvd.elastic.membership.reset
        hvd.elastic.membership.reset = lambda grow: resets.append("grow" if grow else "shrink")
        try:
            @hvd.elastic.run
            def train(state, fail_at):
                starts.append(state.n)
                while state.n < 6:
                    state.n += 1
                    if state.n % 2 == 0:
                        state.commit()
                    if state.n == fail_at and len(starts) == 1:
                        raise hvd.HorovodInternalError("lost")
                    if state.n == 5 and len(starts) == 2:
                        raise hvd.HostsUpdatedInterrupt(skip_sync=True)
                return state.n
            self.assertEqual(train(state, 3), 6)
        finally:
            hvd.elastic.membership.reset = orig
        # Restarted from the commit at 2; the interrupt keeps the live 5.
        self.assertEqual(starts, [0, 2, 5])
        self.assertEqual(resets, ["shrink", 1, "shrink", 1])

    def test_exceptions_where_horovod_users_import_them(self):
        from zcomm.torch import HorovodInternalError, HostsUpdatedInterrupt
        from zcomm.torch.elastic import HorovodInternalError as E2, HostsUpdatedInterrupt as I2
        from zcomm.torch.exceptions import HorovodInternalError as E3
        self.assertIs(HorovodInternalError, E2)
        self.assertIs(HorovodInternalError, E3)
        self.assertIs(HostsUpdatedInterrupt, I2)
        self.assertTrue(issubclass(HorovodInternalError, RuntimeError))
        self.assertTrue(I2(skip_sync=True).skip_sync)
        for name in ("run", "State", "ObjectState", "TorchState", "ElasticSampler"):
            self.assertTrue(hasattr(self.hvd.elastic, name), name)

    def test_commit_with_no_newcomer_waiting_raises_nothing(self):
        state = self.hvd.elastic.ObjectState(bcast_object=lambda o: o, get_rank=self.hvd.rank)
        state.commit()
        state.check_host_updates()


class Sampler(unittest.TestCase):
    """The sampler reads hvd.size() and hvd.rank(): here a job's layout is
    set by hand (self.size, self.rank) to play every rank in one process."""

    def setUp(self):
        from zcomm.torch.elastic import sampler as mod
        self.mod, self.saved = mod, (mod.size, mod.rank)
        self.size, self.rank = 1, 0
        mod.size, mod.rank = (lambda: self.size), (lambda: self.rank)

    def tearDown(self):
        self.mod.size, self.mod.rank = self.saved

    def _sampler(self, n, shuffle, size, rank):
        self.size, self.rank = size, rank
        return self.mod.ElasticSampler(list(range(n)), shuffle=shuffle, seed=3)

    def _reset(self, s, size, rank):
        self.size, self.rank = size, rank
        s.reset()

    def test_partitions_cover_the_dataset(self):
        for n, size in [(0, 1), (1, 3), (13, 4), (16, 4), (17, 5)]:
            parts = [list(self._sampler(n, True, size, r)) for r in range(size)]
            self.assertEqual(len({len(p) for p in parts}), 1, (n, size))
            self.assertEqual(set().union(*map(set, parts)), set(range(n)), (n, size))

    def test_after_a_rank_leaves_the_rest_is_repartitioned(self):
        n, batch = 23, 2
        samplers = [self._sampler(n, True, 4, r) for r in range(4)]
        done = set()
        for s in samplers:
            it = list(s)
            done.update(it[:batch])
            s.record_batch(0, batch)
        state = samplers[0].state_dict()
        self.assertEqual(state["processed_num"], batch * 4)
        rest = []
        for r in range(3):
            s = self._sampler(n, True, 3, r)
            s.load_state_dict(state)
            self._reset(s, 3, r)
            rest.append(list(s))
        self.assertEqual(set().union(*map(set, rest)) | done, set(range(n)))
        self.assertEqual(set().union(*map(set, rest)) & done, set())

    def test_set_epoch_changes_the_order_and_clears_the_count(self):
        s = self._sampler(20, True, 1, 0)
        first = list(s)
        s.record_batch(0, 5)
        s.set_epoch(1)
        self.assertEqual(s.processed_num, 0)
        self.assertNotEqual(list(s), first)
        self.assertEqual(sorted(s), list(range(20)))


if __name__ == "__main__":
    hvd_harness.require_torch()
    unittest.main(verbosity=2)
