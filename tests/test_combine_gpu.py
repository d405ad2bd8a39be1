"""COMBINE archives on a real GPU (`pytest -m gpu` on the GPU machine; skipped
elsewhere): suite cases as archives, their reports equal results.csv, with the
simulations on the GPU (events, rules, a parameter scan's ensemble)."""

from __future__ import annotations

import pytest

# the GPU machine may lack them (no cp312 wheels carried): skip there, saying so, rather
# than fail the whole run's collection
pytest.importorskip("libcombine", reason="python-libcombine is not installed")
pytest.importorskip("libsedml", reason="python-libsedml is not installed")

from .shared_data import needs_semantic  # noqa: E402
from .test_combine_suite import check_suite_case_archive  # noqa: E402

pytestmark = pytest.mark.gpu


@needs_semantic
@pytest.mark.parametrize("number", ["00003", "00463", "00033", "00184", "00963", "01121"])
def test_suite_case_archive_matches_results_on_the_gpu(number, tmp_path, gpu_device):
    check_suite_case_archive(number, tmp_path, [gpu_device.index])
