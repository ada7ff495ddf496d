"""A real small file system that fills up: a tmpfs mounted for the test (needs root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


class Disk:
    """A tmpfs mounted at ``root``, and a file that takes its space."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.filler = root / "filler"

    @property
    def free(self) -> int:
        return shutil.disk_usage(self.root).free

    def fill(self, leave: int = 0) -> None:
        """Take all the free space but ``leave`` bytes."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while self.free > leave:
                os.write(fd, bytes(min(1 << 20, self.free - leave)))
        except OSError:  # the last block did not fit: it is full
            pass
        finally:
            os.close(fd)

    def release(self, size: int | None = None) -> None:
        """Give back ``size`` bytes of the filler (all of it when None)."""
        have = self.filler.stat().st_size
        os.truncate(self.filler, 0 if size is None else max(0, have - size))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Disk]:
    """An 8 MiB tmpfs at ``tmp_path / "disk"`` (skipped where mounting is not allowed)."""
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield Disk(root)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)
