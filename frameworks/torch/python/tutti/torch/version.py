"""Version of the tutti-torch distribution and the tutti-core releases it works with.

setup.py reads this file without importing the package.
"""

__version__ = "0.1.0"

# tutti-core releases this plugin is written for (checked at import time and by pip).
CORE_REQUIREMENT = ">=0.1,<0.2"
