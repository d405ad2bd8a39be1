"""`python -m sbmlgpu ...`: the same as the `sbmlgpu` command."""

import sys

from .cli import main

sys.exit(main())
