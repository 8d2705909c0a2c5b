"""Where a spec's `catalog:` overlay may be read from. The overlay is named by the file under review
(a pull request writes it), so it must stay inside the project: the git work tree that holds the spec,
or the spec's own directory outside one. The check is made on the path before anything is opened,
and again after symlinks are followed, and its message is the same whether or not a file is there,
so a refusal says nothing about the disk outside."""

from __future__ import annotations

import os
from pathlib import Path

from planner.workload.errors import SpecError


def project_root(spec_dir: str | Path) -> Path:
    """The nearest enclosing git work tree (a directory holding .git), else the spec's directory."""
    start = Path(os.path.abspath(spec_dir))
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def overlay_path(named: str, spec_file: str | Path, key: str, root: str | Path | None = None) -> str:
    """The overlay `named` resolved against the spec's directory; SpecError unless it lies inside
    `root` (default: project_root of the spec)."""
    spec_dir = os.path.dirname(os.path.abspath(spec_file))
    top = os.path.abspath(root) if root is not None else str(project_root(spec_dir))
    lexical = os.path.normpath(os.path.join(spec_dir, named))
    if not _inside(lexical, top) or not _inside(os.path.realpath(lexical), os.path.realpath(top)):
        raise SpecError(f"the overlay must be a file inside the project ({top}); this path leads outside it",
                        path=key, file=str(spec_file))
    return lexical
