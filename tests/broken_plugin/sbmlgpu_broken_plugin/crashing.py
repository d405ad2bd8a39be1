"""A plugin whose hooks raise."""

from sbmlgpu.hookspecs import hookimpl


@hookimpl
def sbmlgpu_backends():
    raise RuntimeError("deliberately broken backend hook")


@hookimpl
def sbmlgpu_transform_network(network):
    raise RuntimeError("deliberately broken network pass")
