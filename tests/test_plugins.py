"""The plugin manager: entry points, backends and where they come from, clashes, transforms,
writers, profile observers, and broken plugins reported as PluginError."""

import importlib.metadata
from dataclasses import dataclass

import pytest

import sbmlgpu
from sbmlgpu import hookspecs, ir, plugin_manager
from sbmlgpu.backend import Backend, BackendOptions, option
from sbmlgpu.errors import OptionError, UnsupportedModelError
from sbmlgpu.hookspecs import hookimpl
from sbmlgpu.plugin_manager import PluginError, new_manager


@dataclass
class FakeOptions(BackendOptions):
    gain: float = option(1.0, "multiplies the output", minimum=0.0)


class FakeBackend(Backend):
    description = "a fake for tests"
    options_class = FakeOptions

    def __init__(self, name="fake"):
        self.name = name

    def supports(self, network):
        return []

    def compile(self, network, options, device):  # pragma: no cover - not run here
        raise NotImplementedError


class Provides:
    """A plugin object providing backends with the given names."""

    def __init__(self, *names):
        self.names = names

    @hookimpl
    def sbmlgpu_backends(self):
        return [FakeBackend(n) for n in self.names]


@dataclass
class FakeDist:
    name: str
    version: str
    entry_points: tuple = ()

    @property
    def metadata(self):
        return {"Name": self.name}


def with_distributions(pm, pairs):
    pm.list_plugin_distinfo = lambda: pairs
    return pm


def test_hookspecs_are_the_sbmlgpu_project():
    pm = new_manager(entry_points=False)
    names = {h for h in dir(pm.hook) if h.startswith("sbmlgpu_")}
    assert {"sbmlgpu_backends", "sbmlgpu_transform_network", "sbmlgpu_profile_record",
            "sbmlgpu_result_writers"} <= names
    for name in names:  # every spec states its call rule
        assert getattr(hookspecs, name).__doc__.strip()


def test_builtin_backends_come_only_from_entry_points():
    assert plugin_manager.backends(new_manager(entry_points=False)) == {}
    installed = plugin_manager.backend_entries()
    assert "reference" in installed
    entry = installed["reference"]
    assert (entry.distribution, entry.version) == ("sbmlgpu", sbmlgpu.__version__)
    assert entry.plugin == "reference"
    assert plugin_manager.provider("reference") == ("sbmlgpu", sbmlgpu.__version__)
    eps = importlib.metadata.entry_points(group="sbmlgpu")
    assert "sbmlgpu.plugins.reference" in {ep.value for ep in eps}


def test_manager_is_cached_and_reset_reloads():
    first = plugin_manager.manager()
    assert plugin_manager.manager() is first
    plugin_manager.reset()
    assert plugin_manager.manager() is not first


def test_unknown_backend_lists_installed_and_close_names():
    pm = new_manager(entry_points=False)
    pm.register(Provides("ode", "ssa"), name="p")
    with pytest.raises(OptionError) as e:
        plugin_manager.backend("oed", pm)
    assert "did you mean ode" in str(e.value) and "installed: ode, ssa" in str(e.value)
    assert e.value.option == "backend"
    assert plugin_manager.backend("ssa", pm).name == "ssa"


def test_duplicate_backend_names_are_reported_and_neither_is_used():
    pm = new_manager(entry_points=False)
    a, b = Provides("dup"), Provides("dup", "other")
    pm.register(a, name="plugin-a")
    pm.register(b, name="plugin-b")
    with_distributions(pm, [(a, FakeDist("dist-one", "1.0")), (b, FakeDist("dist-two", "2.5"))])
    assert set(plugin_manager.backends(pm)) == {"other"}  # the rest still works
    [message] = plugin_manager.problems(pm)
    assert "'dup'" in message and "dist-one 1.0" in message and "dist-two 2.5" in message
    with pytest.raises(OptionError, match="'dup' is provided by two plugins.*dist-one 1.0 "
                                          "and dist-two 2.5"):
        plugin_manager.backend("dup", pm)


def test_backends_report_their_distribution():
    pm = new_manager(entry_points=False)
    a = Provides("alpha")
    pm.register(a, name="plugin-a")
    with_distributions(pm, [(a, FakeDist("sbmlgpu-alpha", "0.3"))])
    assert plugin_manager.provider("alpha", pm) == ("sbmlgpu-alpha", "0.3")


def test_a_plugin_returning_no_backend_objects_is_reported_and_skipped(caplog):
    class Bad:
        @hookimpl
        def sbmlgpu_backends(self):
            return ["not a backend"]

    pm = new_manager(entry_points=False)
    pm.register(Bad(), name="bad")
    pm.register(Provides("good"), name="good-plugin")
    with caplog.at_level("WARNING", logger="sbmlgpu"):
        assert set(plugin_manager.backends(pm)) == {"good"}
        plugin_manager.backends(pm)  # asked again: reported once
    [message] = plugin_manager.problems(pm)
    assert "plugin bad" in message and "expected named sbmlgpu.backend.Backend" in message
    assert [r.getMessage() for r in caplog.records] == [message]


def test_a_plugin_hook_that_raises_is_reported_with_its_name_and_skipped():
    class Crashing:
        @hookimpl
        def sbmlgpu_backends(self):
            raise ImportError("no module named cupy")

    pm = new_manager(entry_points=False)
    pm.register(Crashing(), name="crashing")
    pm.register(Provides("good"), name="good-plugin")
    assert set(plugin_manager.backends(pm)) == {"good"}
    [message] = plugin_manager.problems(pm)
    assert "plugin crashing" in message and "ImportError: no module named cupy" in message


def test_entry_point_name_clash_between_distributions_loads_neither(monkeypatch):
    ep = lambda value: importlib.metadata.EntryPoint("same", value, "sbmlgpu")  # noqa: E731
    dists = [FakeDist("dist-x", "1", (ep("os"),)), FakeDist("dist-y", "2", (ep("sys"),))]
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: dists)
    pm = new_manager()
    assert pm.get_plugin("same") is None
    [message] = plugin_manager.problems(pm)
    assert "'same'" in message and "dist-x and dist-y" in message


def test_entry_point_that_fails_to_import_is_reported_with_its_distribution(monkeypatch):
    ep = importlib.metadata.EntryPoint("broken", "no_such_module_for_sbmlgpu_tests", "sbmlgpu")
    good = importlib.metadata.EntryPoint("good", "tests.test_plugins:GOOD_PLUGIN", "sbmlgpu")
    dists = [FakeDist("sbmlgpu-broken", "0.9", (ep,)), FakeDist("sbmlgpu-good", "1.0", (good,))]
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: dists)
    pm = new_manager()
    [message] = plugin_manager.problems(pm)
    assert "'broken'" in message and "sbmlgpu-broken 0.9 fails to load" in message
    assert "ModuleNotFoundError" in message
    assert plugin_manager.provider("good-one", pm) == ("sbmlgpu-good", "1.0")


def test_a_plugin_with_a_misspelt_hook_is_reported_and_skipped(monkeypatch):
    ep = importlib.metadata.EntryPoint("typo", "tests.test_plugins:TYPO_PLUGIN", "sbmlgpu")
    good = importlib.metadata.EntryPoint("good", "tests.test_plugins:GOOD_PLUGIN", "sbmlgpu")
    dists = [FakeDist("sbmlgpu-typo", "0.1", (ep, good))]
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: dists)
    pm = new_manager()
    assert pm.get_plugin("typo") is None and pm.get_plugin("good") is GOOD_PLUGIN
    [message] = plugin_manager.problems(pm)
    assert "'typo' (sbmlgpu-typo 0.1) implements sbmlgpu_backend, which sbmlgpu does not " \
           "define" in message


class _Typo:
    @hookimpl
    def sbmlgpu_backend(self):  # missing "s"
        return []


TYPO_PLUGIN = _Typo()
GOOD_PLUGIN = Provides("good-one")


def network():
    return ir.Network(id="m", parameters=(ir.Parameter("k", 1.0),))


def adds_parameter(pid, **marker):
    """A plugin whose transform appends parameter `pid` to the network."""
    from dataclasses import replace

    class Plugin:
        @hookimpl(**marker)
        def sbmlgpu_transform_network(self, network):
            return replace(network, parameters=network.parameters + (ir.Parameter(pid, 0.0),))

    return Plugin()


def test_transforms_apply_in_registration_order_each_on_the_last_result():
    pm = new_manager(entry_points=False)
    pm.register(adds_parameter("first"), name="one")
    pm.register(adds_parameter("second"), name="two")
    pm.register(adds_parameter("early", tryfirst=True), name="three")
    pm.register(adds_parameter("late", trylast=True), name="zero")

    class Nothing:
        @hookimpl
        def sbmlgpu_transform_network(self, network):
            return None

    pm.register(Nothing(), name="four")
    out = plugin_manager.transform(network(), pm)
    assert [p.id for p in out.parameters] == ["k", "early", "first", "second", "late"]


def test_a_transform_that_raises_is_skipped_but_a_refusal_stops_the_run():
    class Crashing:
        @hookimpl
        def sbmlgpu_transform_network(self, network):
            raise KeyError("bug")

    pm = new_manager(entry_points=False)
    pm.register(Crashing(), name="crashing")
    pm.register(adds_parameter("after"), name="one")
    out = plugin_manager.transform(network(), pm)
    assert [p.id for p in out.parameters] == ["k", "after"]
    assert "plugin crashing" in plugin_manager.problems(pm)[0]

    class Refusing:
        @hookimpl
        def sbmlgpu_transform_network(self, network):
            raise UnsupportedModelError({"flux bounds": ("R1",)}, who="pass")

    pm.register(Refusing(), name="refusing")
    with pytest.raises(UnsupportedModelError, match="flux bounds"):
        plugin_manager.transform(network(), pm)


def test_a_transform_returning_something_else_is_a_plugin_error():
    class Wrong:
        @hookimpl
        def sbmlgpu_transform_network(self, network):
            return "a string"

    pm = new_manager(entry_points=False)
    pm.register(Wrong(), name="wrong")
    with pytest.raises(PluginError, match="plugin wrong: .*returned str"):
        plugin_manager.transform(network(), pm)


def test_core_writers_and_plugin_writers_merge_by_kind_and_clash(tmp_path):
    pm = new_manager(entry_points=False)
    assert set(plugin_manager.writers("time-course", pm)) == {"csv", "npz", "hdf5"}
    for kind in ("steady-state", "estimation", "dbn"):
        assert set(plugin_manager.writers(kind, pm)) == {"csv", "npz", "hdf5"}

    def write_txt(result, path):
        path.write_text(repr(result))

    class Txt:
        @hookimpl
        def sbmlgpu_result_writers(self):
            # a plain name is a time-course format; a (kind, format) pair is any kind's
            return {"txt": write_txt, ("estimation", "svg"): write_txt}

    pm.register(Txt(), name="txt-plugin")
    assert plugin_manager.writers("time-course", pm)["txt"] is write_txt
    assert "txt" not in plugin_manager.writers("estimation", pm)
    assert plugin_manager.writer_for("estimation", "svg", pm) is write_txt
    assert plugin_manager.writer_suffix("time-course", "txt", pm) == ".txt"
    assert plugin_manager.writer_suffix("time-course", "hdf5", pm) == ".h5"
    assert plugin_manager.writer_suffix("estimation", "csv", pm) == ".paving.csv"
    with pytest.raises(OptionError, match="no writer for 'svg' results of kind dbn"):
        plugin_manager.writer_for("dbn", "svg", pm)

    class Csv:
        @hookimpl
        def sbmlgpu_result_writers(self):
            return {"csv": write_txt}

    other = Csv()
    pm.register(other, name="csv-plugin")
    with_distributions(pm, [(other, FakeDist("sbmlgpu-csv2", "1.0"))])
    assert "csv" not in plugin_manager.writers("time-course", pm)  # neither is used
    assert "npz" in plugin_manager.writers("time-course", pm)
    message = plugin_manager.problems(pm)[-1]
    assert "result format ('time-course', 'csv')" in message
    assert "sbmlgpu 0.1.0" in message and "sbmlgpu-csv2 1.0" in message


def test_an_observer_that_raises_is_reported_once_and_dropped():
    pm = new_manager(entry_points=False)
    seen = []

    class Crashing:
        @hookimpl
        def sbmlgpu_profile_record(self, record):
            raise RuntimeError("monitor down")

    class Listener:
        @hookimpl
        def sbmlgpu_profile_record(self, record):
            seen.append(record)

    pm.register(Crashing(), name="crashing")
    pm.register(Listener(), name="listener")
    for observer in plugin_manager.profile_observers(pm):
        observer({"kernel": "a"})
        observer({"kernel": "b"})
    assert seen == [{"kernel": "a"}, {"kernel": "b"}]
    [message] = plugin_manager.problems(pm)
    assert "plugin crashing" in message and "monitor down" in message


def test_profile_observers_only_when_someone_listens():
    pm = new_manager(entry_points=False)
    assert plugin_manager.profile_observers(pm) == []
    seen = []

    class Listener:
        @hookimpl
        def sbmlgpu_profile_record(self, record):
            seen.append(record)

    pm.register(Listener(), name="listener")
    [observer] = plugin_manager.profile_observers(pm)  # one per observing plugin
    observer({"kernel": "rhs", "ms": 1.5})
    assert seen == [{"kernel": "rhs", "ms": 1.5}]


def test_unknown_hook_in_a_plugin_is_refused():
    class Typo:
        @hookimpl
        def sbmlgpu_backend(self):  # missing "s"
            return []

    pm = new_manager(entry_points=False)
    pm.register(Typo(), name="typo")
    with pytest.raises(Exception, match="sbmlgpu_backend"):
        pm.check_pending()


def test_fake_options_validation_names_the_option():
    with pytest.raises(OptionError, match="option gain: -1.0 is below the minimum"):
        FakeOptions.from_mapping({"gain": -1.0})
    assert FakeOptions.from_mapping({"gain": 2}).gain == 2
