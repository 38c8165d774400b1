"""Horovod's DistributedOptimizer (horovod/torch/optimizer.py) on zcomm's
engine: each gradient is allreduced from a hook on its accumulator as soon
as backward has computed it (overlapping the rest of backward), and step()
waits for them all (synchronize()) before the wrapped optimizer's step.

Dense gradients are allreduced (fused by the engine, or in the groups the
caller gives); sparse ones are allgathered as indices and values
(sparse_allreduce_async) or, with sparse_as_dense, densified first. With a
process set, only its members average their gradients; other ranks step on
their own."""
import warnings
from contextlib import contextmanager

import torch

from .compression import Compression
from .functions import broadcast_object
from .mpi_ops import (Adasum, Average, allreduce_async_, global_process_set,
                      grouped_allreduce_async_, size, sparse_allreduce_async, synchronize)


def _split_list(items, n):
    """items cut into n runs of (nearly) equal length, in order."""
    d, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + d + (1 if i < r else 0)
        out.append(items[start:end])
        start = end
    return [run for run in out if run]


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False,
                 process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%d.%d" % (i, j), v)
                                for i, group in enumerate(self.param_groups)
                                for j, v in enumerate(group["params"])]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")
        names = [k for k, _ in named_parameters]
        dups = sorted({k for k in names if names.count(k) > 1})
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             "duplicates: %s" % ", ".join(dups))
        all_ids = {id(v) for group in self.param_groups for v in group["params"]}
        named_ids = {id(v) for _, v in named_parameters}
        unnamed = all_ids - named_ids
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             "were not named. Python object ids: %s"
                             % ", ".join(str(i) for i in unnamed))

        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}  # parameter, or tuple of a group's parameters -> (handle, ctx)
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._groups = self._check_groups(groups)
        self._p_to_group = {}
        self._group_counts = {}
        if self.process_set.included() and size() > 1:
            self._register_hooks()

    @staticmethod
    def _check_groups(groups):
        if groups is None:
            return None
        if isinstance(groups, list):
            seen = set()
            for group in groups:
                for p in group:
                    if not isinstance(p, torch.Tensor):
                        raise ValueError("groups must consist of torch.Tensor.")
                    if id(p) in seen:
                        raise ValueError("A parameter can only appear once in groups.")
                    seen.add(id(p))
            return groups
        if not isinstance(groups, int) or groups <= 0:
            raise ValueError("groups should be a non-negative integer or a list of list of "
                             "torch.Tensor.")
        return groups

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _trainable(self):
        return [p for group in self.param_groups for p in group["params"] if p.requires_grad]

    def _form_groups(self):
        """Groups of parameters allreduced together; the same on every rank
        (rank 0's parameter order decides)."""
        params = self._trainable()
        order = broadcast_object([self._parameter_names.get(p) for p in params], root_rank=0,
                                 name="optimizer.group_order", process_set=self.process_set)
        params.sort(key=lambda p: order.index(self._parameter_names.get(p)))
        if isinstance(self._groups, list):
            ids = {id(p) for p in params}
            groups = [[p for p in g if id(p) in ids] for g in self._groups]
            grouped = {id(p) for g in groups for p in g}
            groups += [[p] for p in params if id(p) not in grouped]
        else:
            groups = _split_list(params, self._groups)
        for group in (tuple(g) for g in groups if g):
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0

    def _register_hooks(self):
        if self._groups is not None:
            self._form_groups()
        for p in self._trainable():
            self._requires_update.add(p)
            # The gradient accumulator of p: its hook runs once p.grad holds
            # this backward's gradient.
            p_tmp = p.expand_as(p)
            grad_acc = p_tmp.grad_fn.next_functions[0][0]
            grad_acc.register_hook(self._make_hook(p))
            self._grad_accs.append(grad_acc)

    def _scale_factors(self):
        if self.op == Average:
            # The engine's Average divides by the set's size once more.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Not computed here (say a branch this rank did not take), but
            # another rank may have: every rank must submit every name.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(tensor, name=name, op=self.op,
                                              process_set=self.process_set), None
            tensor = tensor.to_dense()
        compressed, ctx = self._compression.compress(tensor)
        prescale, postscale = self._scale_factors()
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group):
        name = self._parameter_names.get(group[0])
        compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in group])
        prescale, postscale = self._scale_factors()
        handle = grouped_allreduce_async_(list(compressed), name=name, op=self.op,
                                          prescale_factor=prescale, postscale_factor=postscale,
                                          process_set=self.process_set)
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        for gp in group:  # no-op entries of earlier hook calls
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def _set_grad(self, p, output, ctx):
        aggregated = self._compression.decompress(output, ctx)
        if p.grad.is_sparse:
            if not aggregated.is_sparse:  # sparse_as_dense
                aggregated = aggregated.to_sparse()
            # Sparse tensors have no set_(): the same, in place.
            p.grad.zero_().add_(aggregated)
        elif output is not p.grad:
            p.grad.set_(aggregated)

    def synchronize(self):
        """Waits for every gradient's allreduce (submitting those whose hook
        did not run) and puts the results in p.grad."""
        if not self.process_set.included() or size() == 1:
            self._synchronized = True
            return
        done = set()
        for key in self._handles:
            done.update(key) if isinstance(key, tuple) else done.add(key)
        for p in self._requires_update - done:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, _) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        try:
            for key, (handle, ctx) in self._handles.items():
                if isinstance(key, tuple):
                    for gp, output, gctx in zip(key, synchronize(handle), ctx):
                        self._allreduce_delay[gp] = self.backward_passes_per_step
                        self._set_grad(gp, output, gctx)
                    self._group_counts[key] = 0
                    continue
                # A sparse allreduce's handle is a function that waits.
                output = handle() if callable(handle) else synchronize(handle)
                self._allreduce_delay[key] = self.backward_passes_per_step
                if self._groups is not None:
                    self._group_counts[self._p_to_group[key]] = 0
                self._set_grad(key, output, ctx)
        finally:
            self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """For step() after an explicit synchronize() (gradient clipping)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def _local_step(self, closure=None):
        """The wrapped optimizer's step, without the gradients' allreduce."""
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(set_to_none=set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps optimizer so that step() uses gradients averaged (op) over every
    rank of process_set. named_parameters (model.named_parameters()) names
    the allreduces; compression (Compression.none, Compression.fp16) applies
    to the wire; backward_passes_per_step > 1 accumulates locally first;
    gradient_predivide_factor splits the averaging around the sum;
    num_groups (or groups, lists of parameters) allreduces gradients in
    groups; sparse gradients are allgathered, or densified with
    sparse_as_dense."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum:
        raise NotImplementedError("zcomm.torch: DistributedOptimizer: op=Adasum is not supported "
                                  "by zcomm; use Average or Sum")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed "
                      "in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if process_set is None:
        process_set = global_process_set
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set)
