"""Version of the tutti-mxnet distribution (the one place it is written)."""

__version__ = "0.1.0"

# tutti-core versions this plugin works with.
SUPPORTED_CORE = ">=0.1,<0.2"
