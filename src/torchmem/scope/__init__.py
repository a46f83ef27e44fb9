"""torchmem.scope: tensor lifetimes -- scopes, release, cleanup, snapshots, in-place
safety and device checks.

The public names live on :mod:`torchmem` (``torchmem.scope()``, ``torchmem.release``...).
This package shares its name with :func:`torchmem.scope`: once a submodule such as
``torchmem.scope.core`` has been imported, Python binds ``torchmem.scope`` to this
package, so the package itself is callable and behaves like the function.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from torchmem.scope.core import scope

        return scope(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
