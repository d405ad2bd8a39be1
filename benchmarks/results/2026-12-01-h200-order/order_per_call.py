"""Diagnostic (kept with its log): repeated PEtab objective calls on the GPU, each
call's seconds and, per ensemble of the call, which order it ran in (bundled or not)
and why. Usage: python3 order_per_call.py PROBLEM[,PROBLEM...] [N] [CALLS]"""
import sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from tests.shared_data import MODELS  # noqa: E402
from sbmlgpu.petab import objective  # noqa: E402
from sbmlgpu.petab.values import sampled_sets  # noqa: E402
from sbmlgpu.plugins.ode import program as ode_program  # noqa: E402

seen = []
original = ode_program.OdeProgram._run


def _run(self, task, scheduler, profiler):
    result = original(self, task, scheduler, profiler)
    run = self.last_run
    seen.append((task.ensemble_size, run.get("bundling", ""), run.get("wall_seconds", 0.0),
                 run.get("bundling_info", {}).get("measured_s_per_step")))
    return result


ode_program.OdeProgram._run = _run
problems = sys.argv[1].split(",")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 6
for name in problems:
    yaml = MODELS / "petab-benchmark" / name / f"{name}.yaml"
    prepared = objective(yaml, device=[0], options={"rtol": 1e-6, "atol": 1e-12})
    sets = sampled_sets(prepared.problem, n, 0)
    for call in range(calls):
        seen.clear()
        started = time.perf_counter()
        prepared.evaluate(sets)
        took = time.perf_counter() - started
        print(f"{name} call {call}: {took:.3f} s", flush=True)
        for members, why, wall, measured in seen:
            print(f"    {members:>8} members {wall:.3f} s  {why[:150]}  {measured or ''}")
