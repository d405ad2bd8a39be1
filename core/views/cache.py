"""One view per (network, kind): built on first use, then shared.

A run asks for the same view several times (the backend's supports(), its
compile, the reference's check), and building one resolves every rule and
differentiates rateOf: seconds for a large model. The cache lives on the Network
instance itself, beside the lookups that `Network` already caches with
`functools.cached_property`, rather than in a module-level table keyed by the
network: a view holds its network, so a module-level table would keep every
network alive forever, while a cache on the instance is collected with it. The
key is the instance, not its value (`dataclasses.replace` makes a new Network, and
a transformed network must get views of its own). Networks are immutable, so a
view never goes stale; callers must treat views as read-only.
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

from ..ir import Network

V = TypeVar("V")
_ATTRIBUTE = "_sbmlgpu_views"
# One lock for every network: builds are rare (once per network and kind), and a
# view may build another one (the stochastic view uses the ODE view), hence an RLock.
_lock = threading.RLock()


class _Views(dict):
    """The views of one network. A pickled or deep-copied network carries none:
    they are cheap to rebuild and large to ship."""

    def __reduce__(self):
        return (_Views, ())

    def __deepcopy__(self, memo):
        return _Views()


def memoised(network: Network, key: tuple, build: Callable[[], V]) -> V:
    """The view `key` of `network`, built by `build()` the first time. A build that
    raises (a refused model) caches nothing, so it raises again next time."""
    views = network.__dict__.get(_ATTRIBUTE)
    if views is not None and key in views:
        return views[key]
    with _lock:
        # frozen dataclass: write the instance dict directly, as cached_property does
        views = network.__dict__.setdefault(_ATTRIBUTE, _Views())
        if key not in views:
            views[key] = build()
        return views[key]
