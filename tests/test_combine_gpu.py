"""COMBINE archives on a real GPU (`pytest -m gpu` on the GPU machine; skipped
elsewhere): suite cases as archives, their reports equal results.csv, with the
simulations on the GPU (events, rules, a parameter scan's ensemble)."""

from __future__ import annotations

import pytest

from .shared_data import needs_semantic
from .test_combine_suite import check_suite_case_archive

pytestmark = pytest.mark.gpu


@needs_semantic
@pytest.mark.parametrize("number", ["00003", "00463", "00033", "00184", "00963", "01121"])
def test_suite_case_archive_matches_results_on_the_gpu(number, tmp_path, gpu_device):
    check_suite_case_archive(number, tmp_path, [gpu_device.index])
