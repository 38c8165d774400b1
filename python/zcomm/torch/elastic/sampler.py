"""hvd.elastic.ElasticSampler (Horovod's horovod/torch/elastic/sampler.py):
partitions a dataset across the ranks as DistributedSampler does, counts the
samples the job has processed this epoch (record_batch), and after a reset
partitions what is left among the new set of ranks."""
import math
import random

import torch.utils.data

from ..mpi_ops import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """ElasticSampler(dataset, shuffle=True, seed=0).

    Put it in the TorchState, call record_batch(batch_idx, batch_size)
    after each batch and set_epoch(epoch) at the end of each epoch (not the
    start: a partly done epoch then resumes where the job was). seed must be
    the same on every rank."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0  # samples of this epoch done by the whole job
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch`: a new order (shuffle), nothing processed."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts one batch of batch_size samples on every rank as done."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        """Partitions the samples not processed yet among hvd.size() ranks."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)  # the same on every rank
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        padded = list(self.remaining_indices)
        while padded and len(padded) < self.total_size:  # evenly divisible, as DistributedSampler
            padded += padded[:self.total_size - len(padded)]
        self.indices = padded[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
