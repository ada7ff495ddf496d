"""Triage over a store and trace sources: reading each run, finding the run a replay re-executed,
and keeping the labels of the store's runs in the store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from otel_replay.errors import (
    CorruptBlobError,
    RunNotFoundError,
    SourceError,
    StoreNotWritableError,
)
from otel_replay.replay import Run
from otel_replay.replay.sources import (
    UnbuiltRun,
    UnbuiltRuns,
    load_sources,
    stored_run,
)
from otel_replay.store import FailureLabel, RunInfo, Store
from otel_replay.triage._verdict import Subject, Verdict, judge

__all__ = ["Triage"]


@dataclass
class Triage:
    """Triage of runs of ``store`` (None when there is none: trace sources only). The labels
    of the store's runs are written into it by :meth:`keep`."""

    store: Store | None
    written: bool = True
    _parents: dict[str, Run | None] = field(default_factory=dict)
    _sources: dict[str, Run] = field(default_factory=dict)
    _found: dict[str, tuple[FailureLabel, ...]] = field(default_factory=dict)

    def stored(self, info: RunInfo) -> Verdict:
        """The verdict on run ``info`` of the store, its labels to be kept there
        (:meth:`keep`)."""
        assert self.store is not None
        where = f"store {self.store.location}"
        try:
            subject = Subject.stored(info, stored_run(self.store, info), where)
        except UnbuiltRun as exc:
            subject = Subject.stored(info, None, where, exc.unbuilt)
        except SourceError:  # no step at all: nothing to rebuild, its end still says
            subject = Subject.stored(info, None, where)
        verdict = judge(subject, self._parent(subject))
        self._found[verdict.run_id] = verdict.labels
        return verdict

    def source(self, ref: str) -> Iterator[Verdict]:
        """The verdicts on every run of the trace source ``ref`` (a file, a directory, a URL;
        ``#RUN_ID`` picks one), those that cannot be rebuilt included. Raises SourceError
        when the source cannot be read."""
        try:
            loaded = load_sources(ref, store=None if self.store is None else self.store.location)
            unbuilt = []
        except UnbuiltRuns as exc:
            loaded, unbuilt = exc.runs, exc.unbuilt
        except UnbuiltRun as exc:
            loaded, unbuilt = [], [exc.unbuilt]
        self._sources.update((one.run.run_id, one.run) for one in loaded)
        for one in loaded:
            subject = Subject.read(one, self._held(one.run.run_id))
            yield judge(subject, self._parent(subject))
        for run in unbuilt:
            yield judge(Subject.unbuilt(run, ref, self._held(run.run_id)), None)

    def _held(self, run_id: str) -> bool:
        if self.store is None:
            return False
        try:
            self.store.run(run_id)
        except RunNotFoundError:
            return False
        return True

    def _parent(self, subject: Subject) -> Run | None:
        """The run ``subject`` replays or forks: from the sources read, else from the store;
        None when neither holds it, or the store's copy is damaged."""
        parent = subject.parent_run_id
        if parent is None or subject.mode not in ("replay", "fork"):
            return None
        if parent not in self._parents:
            self._parents[parent] = self._sources.get(parent) or self._from_store(parent)
        return self._parents[parent]

    def _from_store(self, run_id: str) -> Run | None:
        if self.store is None:
            return None
        try:
            return stored_run(self.store, self.store.run(run_id)).run
        except (RunNotFoundError, SourceError, CorruptBlobError):
            # A damaged parent is named as its own damage: its replays are triaged still.
            return None

    def keep(self) -> int:
        """Write the labels of the store's runs triaged so far into the store, replacing what
        it had for them (unless it is read-only: :attr:`written` is then False); the number
        of runs whose labels changed."""
        found, self._found = self._found, {}
        if self.store is None or not self.written or not found:
            return 0
        try:
            return self.store.label(found)
        except StoreNotWritableError:
            self.written = False
            return 0
