"""Scheduling shared by all backends: batching to memory, bundling, multi-GPU, MPI, progress.

    from sbmlgpu.schedule import Scheduler, bundle, CostPredictor

Modules: batching (memory arithmetic), worker (one device's loop, OOM halving),
dispatch (threads over local GPUs), mpi (ranks), combine (results in item order),
growing (a queue that grows while it runs: branch and bound, budgets), growing_mpi
(that queue over MPI ranks), queue_demo (the tree `python -m sbmlgpu.schedule
--queue` checks run_queue with), bundling and predict
(cost-sorted item order), progress (tqdm), scheduler (the `Scheduler` that backends
receive: map_batches and run_queue), ensemble (one runner for one-member-per-item
ensembles: pilot, launch order, batches, rows, summary, MPI root), spill (the one
memory-mapped destination for results larger than memory).
"""

from __future__ import annotations

from .batching import DEFAULT_SAFETY, Batch, items_that_fit, plan_batches
from .bundling import WARP, Permutation, bundle, lane_efficiency, refill_makespan
from .combine import combine_in_order
from .growing import Finished, GrowingQueue, ItemId, QueueBatchRecord
from .mpi import MpiWorld, mpi_world, static_block
from .predict import CostPredictor, pilot_indices
from .progress import Progress
from .scheduler import Scheduler
from .worker import BatchRecord, WorkQueue

__all__ = [
    "Scheduler", "Batch", "BatchRecord", "WorkQueue", "plan_batches", "items_that_fit",
    "DEFAULT_SAFETY", "Permutation", "bundle", "lane_efficiency", "refill_makespan",
    "WARP",
    "CostPredictor", "pilot_indices", "Progress", "MpiWorld", "mpi_world",
    "static_block", "combine_in_order", "Finished", "GrowingQueue", "ItemId",
    "QueueBatchRecord",
]
