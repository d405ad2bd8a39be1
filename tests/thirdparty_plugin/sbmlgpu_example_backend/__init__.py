"""sbmlgpu plugin: the hook functions sbmlgpu calls (found through the entry point)."""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    # Import the backend here, not at module level: sbmlgpu loads every plugin
    # module at start-up, and `sbmlgpu backends` should stay fast.
    from .backend import EulerBackend

    return [EulerBackend()]
