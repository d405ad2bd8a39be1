"""The built-in backends of sbmlgpu, each registered through the `sbmlgpu` entry-point group."""
