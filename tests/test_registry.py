import pytest

from narbench.core import registry


def test_shipped_plugins_are_registered_by_entry_points():
    assert {"gcn", "gat", "random"} <= set(registry.names("encoder"))
    assert "none" in registry.names("splitter")
    assert "nas" in registry.names("dataset")
    from narbench.baselines.gnn import GCNEncoder

    assert registry.load("encoder", "gcn") is GCNEncoder


def test_third_party_distribution_registers_encoder_and_dataset(plugin):
    assert "nodefreq" in registry.names("encoder")
    assert "toy" in registry.names("dataset")
    cls = registry.load("encoder", "nodefreq")
    assert cls.__module__ == "narbench_testplugin"
    origin = registry.origin("encoder", "nodefreq")  # what a result file records of a submitted encoder
    assert origin["distribution"] == "narbench-testplugin" and origin["version"]
    assert origin["value"].startswith("narbench_testplugin:")
    with pytest.raises(registry.UnknownNameError):
        registry.origin("encoder", "nope")


def test_unknown_name_lists_known_names():
    with pytest.raises(registry.UnknownNameError) as err:
        registry.load("encoder", "nope")
    message = str(err.value)
    assert "unknown encoder 'nope'" in message and "gcn" in message and "gat" in message


def test_broken_plugin_is_not_reported_as_unknown(plugin):
    with pytest.raises(registry.RegistryError, match="broken.*fails to load"):
        registry.load("encoder", "broken")


def _registered():
    from importlib.metadata import entry_points

    return [(kind, ep.name) for kind, group in sorted(registry.GROUPS.items())
            for ep in sorted(entry_points(group=group), key=lambda e: e.name)]


@pytest.mark.parametrize("kind, name", _registered(), ids=lambda v: v)
def test_every_registered_entry_point_loads_as_its_kind_under_its_name(kind, name):
    from narbench.data.dataset import DatasetProvider
    from narbench.train.encoder import Encoder
    from narbench.train.splitter import Splitter

    obj = registry.load(kind, name)
    base = {"encoder": Encoder, "splitter": Splitter, "dataset": DatasetProvider}[kind]
    assert isinstance(obj, type) and issubclass(obj, base), f"{kind} {name!r} is {obj!r}, not a {base.__name__}"
    # a dataset version registered beside the current one (`real-2.1`, `real-2.2`, `real-2.3`) is `<name>-<version>`
    assert obj.name == name or (kind == "dataset" and name == f"{obj.name}-{obj.version}"), \
        f"{kind} entry point {name!r} loads a class whose name is {obj.name!r}"
