"""A deep SIVIA near the truth on the host: the levels that decide the real runs.

    python3 deep_search.py CASE DELTA EPSILON [option=value ...]   (from the project root)

The thesis's data come from benchmarks/interval_data.py, written into $IVDATA (made
there when it has no lv.csv; default /tmp/ivdata)."""
import os, subprocess, sys, time, json
import sbmlgpu
case, delta, eps = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
opts = dict(a.split("=") for a in sys.argv[4:])
root = os.environ.get("IVDATA", "/tmp/ivdata") + "/"
if not os.path.exists(root + "lv.csv"):
    subprocess.run([sys.executable, "benchmarks/interval_data.py", "--out", root], check=True,
                   stdout=subprocess.DEVNULL)
if case == "lv":
    model, data, truth = "sbml_models/lotka_volterra.xml", root + "lv.csv", {"p2": 0.01, "p4": 0.02}
else:
    model, data = "sbml_models/seir_linear.xml", root + "seir.csv"
    truth = {"p2": 0.1, "p3": 0.4} if case == "seir2" else {"p2": 0.1, "p3": 0.4, "p4": 0.2}
unknown = {k: (v - delta, v + delta) for k, v in truth.items()}
options = {k: (int(v) if v.isdigit() else v) for k, v in opts.items()}
t = time.perf_counter()
pav = sbmlgpu.estimate(model, backend="interval", data=data, unknown=unknown, epsilon=eps,
                       options=options, device="cpu")
dt = time.perf_counter() - t
st = pav.statistics if hasattr(pav, "statistics") else {}
print(json.dumps({"case": case, "opts": opts, "s": round(dt, 3), "search_s": round(st.get("seconds", 0), 3), "enclosures": st.get("data_enclosures"), **{k: st.get(k) for k in ("boxes_evaluated", "boxes_feasible", "boxes_undetermined", "taylor_steps")}}))
