"""The ODE machinery as a library: what every backend that integrates ODEs composes.

The `ode` backend (plugins/ode) is built on it; DBN approximation and interval
estimation integrate ODEs too, and a backend never imports another backend.

Modules (import the one you need; nothing here imports PyCUDA or a plugin):

- atoms.py       relational atoms of triggers and piecewise switches: relation
                 codes, truth tables, sign classes, AtomTable.split_trigger /
                 add_switches (the CPU reference uses it too)
- parameters.py  parameter specialisation: varied parameters from a table, fixed
                 ones as literals, reciprocals, numeric exponents
- model.py       KernelModel: the expressions of one specialised kernel (rhs, x0,
                 outputs, events split into atoms, Jacobian)
- naming.py      the table of SBML ids at the top of a kernel, the comment on each
                 generated assignment
- codegen.py     kernel_context / generate: a kernel template rendered for a model,
                 method and output sink -> KernelSource (text, FLOP counts)
- sparse_lu.py   sparse LU of rodas4 and bdf for larger models (straight-line code, or
                 loops over index tables for large plans)
- sinks.py       output sinks: TrajectorySink (values), BinSink (bin indices)
- summary.py     ensemble statistics per batch (host side of templates/summary.cu)
- tolerances.py  each state's absolute tolerance from the member's initial state
                 (--scaled-atol; templates/adaptive.cuh's ode_start_atol, in numpy)
- engines.py     GpuEngine / HostEngine: run a kernel with the trajectory sink on a
                 device or on the host; LaunchConfig, BatchOutput

Templates (templates/, loaded as "sbmlgpu.ode:<file>"): prelude.cuh, model.cuh,
rk4.cuh, dopri5.cuh, rodas4.cuh, bdf.cuh (adaptive.cuh, linear.cuh), events.cuh, driver.cuh (limits.cuh),
sink_trajectory.cuh, sink_bins.cuh, entry.cuh, and summary.cu (a kernel of its
own). A backend's kernel includes them in that order (plugins/ode/kernels/ode.cu).
"""
