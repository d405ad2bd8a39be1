"""Deliberately broken sbmlgpu plugins, for tests."""
