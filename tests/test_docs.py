"""The documentation builds (``mkdocs build --strict``: a broken link or anchor fails), every page
of docs/ is in it, and the README's links into docs/ lead to pages that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _nav_pages() -> list[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return [page for entry in config["nav"] for page in entry.values()]


@pytest.mark.subprocess
def test_the_docs_build_strictly_with_every_page(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pages = _nav_pages()
    assert sorted(pages) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    for page in pages:
        built = site / ("index.html" if page == "index.md" else f"{page[:-3]}/index.html")
        assert built.is_file(), page
    configuration = (site / "configuration" / "index.html").read_text()
    assert "OTEL_REPLAY_STORE" in configuration and "OTEL_REPLAY_IGNORE" in configuration


def test_the_readme_links_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert linked, "the README links to the docs"
    for target in linked:
        assert (ROOT / target).is_file(), target
