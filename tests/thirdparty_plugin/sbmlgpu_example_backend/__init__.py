"""sbmlgpu plugin: the hook functions sbmlgpu calls (found through the entry point)."""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    # Import the backends here, not at module level: sbmlgpu loads every plugin
    # module at start-up, and `sbmlgpu backends` should stay fast.
    from .euler import EulerBackend
    from .newton import NewtonBackend

    return [EulerBackend(), NewtonBackend()]


@hookimpl
def sbmlgpu_result_writers():
    from .writers import write_tsv

    return {"tsv": write_tsv}  # a plain format name: a writer of time courses
