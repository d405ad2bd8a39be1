"""A plugin whose module fails to import (a dependency that is not installed)."""

import sbmlgpu_dependency_that_is_not_installed  # noqa: F401
