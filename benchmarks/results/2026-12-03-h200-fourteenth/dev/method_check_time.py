"""Time the method check (choose_method) of a PEtab model's 10^5-member table, as the
GPU first run does (probes built by a warm run on 64 members first)."""
import sys, time, cProfile, pstats, io
from pathlib import Path
import numpy as np
sys.path.insert(0, "/work/main/benchmarks")
import ode_petab as op
import sbmlgpu
from sbmlgpu import plugin_manager
from sbmlgpu.outputs import default_outputs
from sbmlgpu.ode.model import KernelModel
from sbmlgpu.plugins.ode import stiffness
from sbmlgpu.plugins.ode.options import OdeOptions
from sbmlgpu.plugins.ode.program import _probe_members, _table, _is_constant

root = Path("/work/shared/models/petab-benchmark")
prof = "--prof" in sys.argv
for name in [a for a in sys.argv[1:] if not a.startswith("--")]:
    folder = next(root.rglob(name)) if not (root / name).exists() else root / name
    problem = op.petab_problem(folder)
    network = sbmlgpu.load(str(problem["sbml"]))
    n = 100000
    cond, sets, nominal = op.parameter_sets(problem, network, n)
    t_end = op.end_time(problem, cond)
    times = np.linspace(0.0, t_end, op.POINTS)
    outputs = tuple(default_outputs(network))
    from sbmlgpu.plugins.ode.backend import OdeBackend
    prog = OdeBackend().compile(network, OdeOptions.from_mapping({'method': 'auto'}), None)
    constant = {k: float(np.asarray(v).reshape(-1)[0]) for k, v in sets.items() if _is_constant(v)}
    varied = tuple(k for k in sets if k not in constant)
    table = _table(sets, varied, n)
    model = KernelModel(prog.ode, varied, outputs, constant)
    span = float(times[-1] - times[0])
    def check(tab):
        count = stiffness.screen_size(model.n_states)
        screen = stiffness.screen_members(tab, count) if count else None
        return stiffness.choose_method(model, lambda: _probe_members(tab), float(times[0]), span,
                                       screen=screen, probes=prog._probes)
    check(np.ascontiguousarray(table[:, :64]))
    t = time.perf_counter(); m = check(table); dt = time.perf_counter() - t
    t = time.perf_counter(); check(table); dt2 = time.perf_counter() - t
    print(f"{folder.name}: states {model.n_states} varied {len(varied)} {m[0]} {dt:.3f} s / again {dt2:.3f} s  ({m[1][:90]})", flush=True)
    if prof:
        pr = cProfile.Profile(); pr.enable(); check(table); pr.disable()
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(25); print(s.getvalue())
