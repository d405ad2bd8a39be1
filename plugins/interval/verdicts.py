"""Verdict codes of a box, as the kernels write them (IV_* in kernels/validated.cuh)."""

REJECTED = 0  # an output enclosure misses its data interval: no point of the box fits
FEASIBLE = 1  # every output enclosure lies inside its data interval: every point fits
UNDECIDED = 2  # neither: bisect (or keep as undetermined below epsilon)
FAILED = 3  # undecided because the enclosure could not be carried to the last time

#: name -> code, as the kernels' IV_<NAME> (rendered into the template)
CODES = {"REJECTED": REJECTED, "FEASIBLE": FEASIBLE, "UNDECIDED": UNDECIDED, "FAILED": FAILED}
