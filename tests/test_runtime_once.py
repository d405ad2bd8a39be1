"""OncePerKey (sbmlgpu.runtime.once): one build per key, and a slow build of one key
never holds a thread that asks for another (the host libraries' and core kernels'
caches). Threads are coordinated by events; the joins' timeouts only turn a deadlock
into a failure."""

from __future__ import annotations

import threading
import uuid

import pytest

from sbmlgpu.runtime import host
from sbmlgpu.runtime.once import OncePerKey

HANG_S = 30  # a join this long means the thread is blocked: a failure, not a wait


def _in_thread(target):
    out: dict = {}

    def run():
        try:
            out["value"] = target()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_threads_asking_for_one_key_at_once_build_it_once():
    once: OncePerKey[str] = OncePerKey()
    entered, release = threading.Event(), threading.Event()
    builds = []

    def slow():
        builds.append(1)
        entered.set()
        assert release.wait(HANG_S)
        return "built"

    first, out1 = _in_thread(lambda: once.get("k", slow))
    assert entered.wait(HANG_S)
    second, out2 = _in_thread(lambda: once.get("k", slow))
    release.set()
    first.join(HANG_S), second.join(HANG_S)
    assert out1 == {"value": "built"} and out2 == {"value": "built"}
    assert len(builds) == 1 and "k" in once


def test_a_build_in_progress_does_not_hold_a_key_already_built():
    once: OncePerKey[str] = OncePerKey()
    assert once.get("loaded", lambda: "old") == "old"
    entered, release = threading.Event(), threading.Event()

    def compile_for_long():
        entered.set()
        assert release.wait(HANG_S)
        return "new"

    builder, built = _in_thread(lambda: once.get("compiling", compile_for_long))
    assert entered.wait(HANG_S)
    reader, read = _in_thread(lambda: once.get("loaded", lambda: "rebuilt"))
    reader.join(HANG_S)
    try:
        assert not reader.is_alive(), "a built key waited for another key's build"
        assert read == {"value": "old"} and builder.is_alive()
        # and a third key builds beside the one in progress
        assert once.get("other", lambda: "beside") == "beside"
    finally:
        release.set()
        builder.join(HANG_S)
    assert built == {"value": "new"}


def test_a_build_that_raises_stores_nothing_and_the_next_call_builds_again():
    once: OncePerKey[int] = OncePerKey()

    def fails():
        raise OSError("no compiler today")

    with pytest.raises(OSError, match="no compiler today"):
        once.get("k", fails)
    assert "k" not in once
    assert once.get("k", lambda: 7) == 7


def test_host_load_returns_a_loaded_library_while_another_source_compiles(monkeypatch):
    """The case measured on the H200: a second run's loaded bdf build waited 0.47 s
    behind the rodas4 build's compile under one lock."""
    monkeypatch.setattr(host, "require_compiler", lambda: "c++")
    monkeypatch.setattr(host, "build_flags", lambda compiler, flags=(), openmp=True: ())
    monkeypatch.setattr(host.ctypes, "CDLL", lambda path: f"library at {path}")
    entered, release = threading.Event(), threading.Event()

    def build(source, name, flags=(), *, openmp=True, compiler=None):
        if source == slow:
            entered.set()
            assert release.wait(HANG_S)
        return f"/cache/{name}.so"

    # sources of their own: the process's cache of loaded libraries is not patched
    fast, slow = f"fast {uuid.uuid4()}", f"slow {uuid.uuid4()}"
    monkeypatch.setattr(host, "build", build)
    assert host.load(fast, "bdf.cu") == "library at /cache/bdf.cu.so"
    compiling, _ = _in_thread(lambda: host.load(slow, "rodas4.cu"))
    assert entered.wait(HANG_S)
    again, out = _in_thread(lambda: host.load(fast, "bdf.cu"))
    again.join(HANG_S)
    try:
        assert not again.is_alive(), "a loaded library waited for another's compile"
        assert out == {"value": "library at /cache/bdf.cu.so"}
    finally:
        release.set()
        compiling.join(HANG_S)
