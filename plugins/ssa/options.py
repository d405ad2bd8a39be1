"""The options of the `ssa` backend (the CLI turns each into --name-with-dashes)."""

from __future__ import annotations

from dataclasses import dataclass

from sbmlgpu.backend import BackendOptions, option
from sbmlgpu.errors import OptionError

from . import tuning
from .choices import LAYOUTS, METHODS, RATE_SPECIES, UPDATES


@dataclass
class SsaOptions(BackendOptions):
    method: str = option(
        "auto", "direct: Gillespie's direct method (Klingbeil et al. 2012); optimized: the "
                "optimized direct method (reactions sorted by a presimulation's firing counts, "
                "early-exit search, dependency-graph updates; Cao, Li, Petzold 2004), for "
                "large networks; auto: the optimized method from "
                f"{tuning.OPTIMIZED_FROM_REACTIONS} reactions on the GPU outside the register "
                f"layout, from {tuning.CPU_OPTIMIZED_FROM_REACTIONS} on the compiled CPU engine, "
                "else direct (plugins/ssa/tuning.py)", choices=("auto", *METHODS))
    layout: str = option(
        "auto", "where each GPU thread keeps its state and propensities: register, fat "
                "(shared memory), thin (global memory, species-major, coalesced); auto "
                "chooses from the reaction and species counts and the device's shared memory",
        choices=("auto", *LAYOUTS))
    update: str = option(
        "auto", "after a firing recompute every propensity (full, branch-free) or only "
                "those that depend on the changed species (sparse); auto: full for the "
                "register layout with the direct method, else sparse",
        choices=("auto", *UPDATES))
    block_size: int = option(0, "threads per block (a multiple of 32); 0: the measured default "
                                "of plugins/ssa/tuning.py", minimum=0, maximum=1024)
    precision: str = option("double", "arithmetic of propensities and waiting times (times "
                                      "are always double; float counts are exact up to 2^24)",
                            choices=("double", "float"))
    rate_species: str = option(
        "sbml", "how kinetic laws read species: sbml (concentration unless "
                "hasOnlySubstanceUnits, as SBML and the DSMTS suite say) or amount (every "
                "species symbol is its molecule count)", choices=RATE_SPECIES)
    # a default limit, so that a realisation whose firings never end (rates that grow
    # without bound) stops with a status that says what to try instead of running on
    max_firings: int = option(100_000_000, "stop a realisation after this many firings (its "
                                           "status becomes max_steps); 0: no limit",
                              minimum=0)
    histogram_bins: int = option(64, "with --summary: bins of the per-time histograms kept "
                                     "beside mean and sd (quantiles are read from them); 0: "
                                     "none", minimum=0, maximum=4096)
    pilot: int = option(1024, "with --summary on the GPU: realisations run first with full "
                              "output, whose mean and range set the shift and histogram "
                              "bins of the on-GPU statistics", minimum=2)
    cpu_engine: str = option(
        "auto", "CPU path: compiled (the generated kernel compiled with the C++ compiler, "
                "OpenMP over the cores), numpy (vectorised over realisations, no compiler "
                "needed); auto: compiled when a C++ compiler is found",
        choices=("auto", "compiled", "numpy"))
    # OpenMP with 100000 threads ran out of stack and segfaulted: capped well above any
    # host's core count
    cpu_threads: int = option(0, "threads of the compiled CPU engine; 0: every core",
                              minimum=0, maximum=1024)
    trajectory_dir: str | None = option(
        None, "folder for full trajectories that do not fit in memory (a memory-mapped "
              "file); default: the system's temporary folder")

    def check(self) -> None:
        if self.block_size % 32:
            raise OptionError("block-size", f"{self.block_size} is not a multiple of 32")
