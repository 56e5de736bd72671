"""Upstream compatibility: re-exports upstream's ``app.utils.files_utils`` from
:mod:`app.compat.utils.files_utils`."""

from app.compat.utils.files_utils import (
    EXCLUDED_DIRS,
    EXCLUDED_EXT,
    EXCLUDED_FILES,
    clean_path,
    should_exclude_file,
)

__all__ = ["EXCLUDED_DIRS", "EXCLUDED_EXT", "EXCLUDED_FILES", "clean_path", "should_exclude_file"]
