"""Ray is optional for tutti-core: import it only when tutti.ray is used."""

_MESSAGE = ('tutti.ray needs Ray: pip install "ray[default]" (tested with ray==2.60.0)')


def ray_module():
    """The `ray` module; ImportError naming the pip package when it is missing."""
    try:
        import ray
        import ray.util.placement_group  # noqa: F401
    except ImportError as exc:
        raise ImportError("%s (%s)" % (_MESSAGE, exc)) from exc
    return ray
