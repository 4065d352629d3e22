"""`python -m tutti.runner ...` is `tuttirun ...`."""

import sys

from .launch import main

sys.exit(main())
