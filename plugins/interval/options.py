"""Options of the `interval` backend (the task's own fields — data, unknowns, epsilon,
initial intervals — are Estimation's: sbmlgpu.tasks)."""

from __future__ import annotations

from dataclasses import dataclass

from sbmlgpu.backend import BackendOptions, option

KERNELS = ("persistent", "multi")
# the order of IV_STEPS_* in kernels/validated.cuh
STEP_RULES = ("doubling", "predicted")


@dataclass
class IntervalOptions(BackendOptions):
    order: int = option(6, "order p of the Taylor series (the remainder is the p-th term "
                           "over the a-priori enclosure)", minimum=2, maximum=20)
    max_step: float = option(0.0, "longest integration step (0: as long as the data's "
                                  "times and the a-priori enclosure allow)", minimum=0.0)
    tolerance: float = option(1e-10, "a step is halved while its remainder term is wider "
                                     "than this times 1 + |x| (and than 0.1 % of the box of "
                                     "x); accuracy only, every step is guaranteed",
                              minimum=0.0)
    max_halvings: int = option(20, "halvings of a step whose a-priori enclosure fails "
                                   "before the box is left undecided", minimum=0,
                               maximum=60)
    step_rule: str = option("predicted", "how the next step's length is chosen: predicted "
                                         "(from the last remainder's width against its "
                                         "allowance, which grows as h^p) or doubling (twice "
                                         "after a step, half after a failure); every step is "
                                         "guaranteed either way", choices=STEP_RULES)
    span: int = option(-1, "data times inside one step checked at once at most, from one "
                           "enclosure over their span of time, where the box is well inside "
                           "their data (the verdicts are the ones the times give alone; the "
                           "span shrinks where it is not, grows where it is); 0 or 1: each "
                           "time alone; -1: 256 on the host (measured 1.5-6x faster), 0 on a "
                           "GPU (no gain measured there)", minimum=-1, maximum=1_000_000)
    max_steps: int = option(1_000_000, "integration steps per box before it is left "
                                       "undecided", minimum=1)
    wide: float = option(1.0, "stop a box that will be split once an output's enclosure "
                              "is wider than this many times its data interval (its halves "
                              "are checked either way; measured 2.4x faster on LV with the "
                              "same paving); 0: carry every box to the last data time, where "
                              "it may still be rejected", minimum=0.0)
    presplit: int = option(-1, "bisect the search box this many times before the first "
                               "verdicts, so that the first launch fills the device "
                               "(-1: 15 on a GPU, up to 4 boxes per core on the host)",
                           minimum=-1, maximum=30)
    batch: int = option(0, "multi loop: boxes per work item of the queue (a launch takes "
                           "one or more; 0: 4,096 on a GPU, 16 per core on the host)",
                        minimum=0)
    max_boxes: int = option(50_000_000, "boxes handed out before the search stops (in "
                                        "whole work items, see --batch); what is still "
                                        "queued is kept as undetermined and the paving is "
                                        "marked incomplete (the persistent kernel counts "
                                        "boxes)", minimum=1)
    time_limit: float = option(0.0, "seconds before the search stops, as --max-boxes "
                                    "(0: none)", minimum=0.0)
    mpi: bool = option(False, "share the boxes between MPI ranks (run the command under "
                              "mpirun; rank 0 keeps the queue, every rank checks boxes on its "
                              "GPU or its cores, rank 0 writes the paving)")
    balance: str = option("dynamic", "several GPUs or MPI ranks (the multi loop): dynamic "
                                     "(one queue of boxes that every GPU and rank takes "
                                     "from) or static (the baseline of Sharma's thesis: the "
                                     "presplit boxes divided once into equal shares, each "
                                     "GPU and rank works on its share and the boxes it "
                                     "splits off alone); the same paving either way",
                          choices=("dynamic", "static"))
    block_size: int = option(64, "threads per block of the GPU kernel (the persistent "
                                 "kernel: a multiple of 32)", minimum=32, maximum=1024)
    kernel: str = option("persistent", "the GPU's SIVIA: persistent (the whole search in "
                                       "one kernel over a device box queue) or multi (one "
                                       "launch per batch, the host bisects); the host path "
                                       "always runs the multi loop", choices=KERNELS)
    eager_fetch: bool = option(False, "persistent kernel: a warp fetches boxes as soon as "
                                      "--fetch-idle of its lanes are idle (busy lanes "
                                      "pause); off (the default: measured 13 % slower on "
                                      "SEIR-3P with it, no faster elsewhere): only when all "
                                      "32 are")
    fetch_idle: int = option(8, "persistent kernel, eager fetch: idle lanes (of a warp's "
                                "32) that make the warp fetch", minimum=1, maximum=32)
    warps_per_sm: int = option(2, "persistent kernel: resident warps per SM at most, but "
                                  "one block at least (0: as many as its registers allow; "
                                  "fewer keep each lane's local memory, its Taylor pieces, "
                                  "nearer in the caches: 2 measured 1.1-1.2x faster than 8 "
                                  "on an H200)",
                               minimum=0, maximum=64)
    step_budget: int = option(8, "persistent kernel: Taylor steps a lane tries before its "
                                 "warp looks for idle lanes", minimum=1)
    eager_create: bool = option(False, "persistent kernel: when the queue is empty, busy "
                                       "lanes bisect their boxes for idle lanes (the paving "
                                       "then has smaller boxes where this happened; measured "
                                       "2x slower on LV, 12-16 % faster on SEIR-2P: off by "
                                       "default)")
    queue_capacity: int = option(0, "persistent kernel: boxes the device queue holds (and "
                                    "its output); a full one ends the launch and the host "
                                    "relaunches (0: 4,194,304, fewer where memory is short)",
                                 minimum=0)
    launch_seconds: float = option(5.0, "persistent kernel: longest launch; the host then "
                                        "checks --time-limit, shows progress and relaunches "
                                        "(0: until done)", minimum=0.0)
