"""Version of the tutti-core distribution (read by common/setup.py without importing)."""

__version__ = "0.1.0"
