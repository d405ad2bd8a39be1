"""Results: one class per task kind, each with CSV, NPZ and HDF5 writers and `.plot()`.

    TimeCourseResult   time courses of an ensemble (or their summary), per-member status
    StateDistribution  probability per state (steady state)
    Paving             boxes of parameter space with a verdict (estimation)
    DbnResult          conditional probability tables per time slice (DBN)

`read(path)` loads any of them back from NPZ or HDF5.
"""

from .base import Result
from .dbn import DbnResult
from .distribution import StateDistribution
from .io import ResultFileError, read, read_hdf5, read_npz
from .paving import Paving
from .status import Status
from .summary import DEFAULT_QUANTILES, Summary
from .time_course import TimeCourseResult

__all__ = ["Result", "TimeCourseResult", "StateDistribution", "Paving", "DbnResult",
           "Status", "Summary", "DEFAULT_QUANTILES", "read", "read_npz", "read_hdf5",
           "ResultFileError"]
