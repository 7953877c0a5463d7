"""Warnings that point at the user's call, however deep in the package they are raised."""

from __future__ import annotations

import os
import sys
import warnings

#: The package's folder: frames of files under it are the package's own.
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)``, attributed to the first caller outside the
    package (the user's ``fit``, ``predict`` or ``cross_val_score`` line), so that the
    warning names the user's file and line rather than the package's internals."""
    frame, level = sys._getframe(1), 2  # warn_user's caller: stacklevel 2
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)
