"""Access to the compiled core (prenet._core), with a clear message when the package was not built."""
import functools


@functools.lru_cache(maxsize=None)
def core():
    try:
        from . import _core
    except ImportError as error:  # pragma: no cover - only on a broken install
        raise ImportError(
            "prenet's native core (prenet._core) is missing: install the package with "
            "`pip install --no-build-isolation .` (see README.md) instead of importing it from the source tree"
        ) from error
    return _core
