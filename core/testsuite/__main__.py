"""`python -m sbmlgpu.testsuite CASES_DIR ...`"""

import sys

from .cli import main

sys.exit(main())
