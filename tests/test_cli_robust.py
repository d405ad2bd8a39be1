"""The command line where its surroundings are unusual (issue 14, point 6): a closed
pipe, no terminal, no GPU, a CPU-path profile."""

import os
import subprocess
import sys
from pathlib import Path

from sbmlgpu import cli, runtime
from sbmlgpu.schedule.progress import LineReport, Progress
from tests.test_cli import model, run_main  # noqa: F401 - the fixture and helper of CLI tests


def test_info_into_a_closed_pipe_ends_quietly(model):
    exe = Path(sys.executable).with_name("sbmlgpu")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "sbmlgpu"]
    proc = subprocess.Popen(command + ["info", str(model)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "SBMLGPU_NO_GPU": "1"})
    proc.stdout.close()  # the reader is gone before a line is written: `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) in (0, cli.EXIT_BROKEN_PIPE)
    assert err == "", err


def test_devices_without_a_gpu_is_one_error_line(capsys, model, tmp_path, monkeypatch):
    monkeypatch.setenv("SBMLGPU_NO_GPU", "1")
    runtime.reset()
    try:
        code, _, err = run_main(capsys, "run", model, "--end", 1, "--devices", "0",
                                "-o", tmp_path)
    finally:
        runtime.reset()
    assert code == 2
    assert err.splitlines() == ["sbmlgpu: error: GPU devices [0] requested, but no GPU "
                                "found (SBMLGPU_NO_GPU is set)"]


def test_a_cpu_profile_says_there_were_no_kernels(capsys, model, tmp_path):
    code, out, err = run_main(capsys, "run", model, "--end", 1, "--backend", "reference",
                              "--profile", tmp_path / "p.json", "-o", tmp_path)
    assert code == 0, err
    assert "profile: no kernels were launched (the CPU path runs none)" in out
    assert "launches  total ms" not in out  # no table of empty rows


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_without_a_terminal_progress_is_lines_every_10_percent_or_10_s(tmp_path):
    clock, log = Clock(), tmp_path / "log"
    with open(log, "w") as stream:
        report = LineReport(1000, "realisations", 2.0, stream, clock=clock, heartbeat=False)
        report.update(50)  # within the delay: nothing
        clock.now = 3.0
        report.update(10)  # first line
        report.update(50)  # 6 % more since it: nothing
        report.update(50)  # 11 % more: a line
        clock.now = 14.0
        report.update(1)  # 10 s on: a line
        report.update(1)
        report.close()  # the last count
    lines = log.read_text().splitlines()
    assert lines == [
        "sbmlgpu: progress: 60 of 1,000 realisations (6 %) after 3 s",
        "sbmlgpu: progress: 160 of 1,000 realisations (16 %) after 3 s",
        "sbmlgpu: progress: 161 of 1,000 realisations (16 %) after 14 s",
        "sbmlgpu: progress: 162 of 1,000 realisations (16 %) after 14 s"]


def test_progress_to_a_file_uses_lines_and_a_heartbeat(tmp_path):
    log = tmp_path / "log"
    with open(log, "w") as stream:
        bar = Progress(10, delay=0.0, desc="items", file=stream)
        assert isinstance(bar._bar, LineReport)  # noqa: SLF001 - which kind is the point
        bar._bar.seconds = 0.05  # noqa: SLF001
        import time

        time.sleep(0.5)  # no item finishes, yet lines come
        bar.close()
    lines = log.read_text().splitlines()
    assert lines and lines[0].startswith("sbmlgpu: progress: 0 of 10 items (0 %)")
