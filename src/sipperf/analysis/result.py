""":class:`Analysis`: what :func:`sipperf.analysis.analyze` found -- the tables and the account.

It holds everything and writes nothing until asked: :meth:`Analysis.write` writes the CSV files
and ``report.json``; :func:`sipperf.figures.analysis_figs.write_figures` draws the figures.
The same object comes from the in-memory path (``timeline`` is the whole timeline) and from the
streaming engine (``timeline`` is None: what the timeline would have given is reduced as the
capture is read, :mod:`sipperf.analysis.stream`); code that needs per-message data asks
:meth:`Analysis.figure_data`, which serves both.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.timeline import IngestReport

__all__ = ["Analysis", "order_key"]


def order_key(tl: pd.DataFrame) -> np.ndarray:
    """Each row's first instant (float ns), rows without any last."""
    from sipperf.timeline import first_instant

    key = first_instant(tl)
    return np.where(np.isnan(key), np.inf, key)


@dataclass
class Analysis:
    """The tables of one analysis (the files ``sipperf analyze`` writes) and its account.

    ``components``: per message type and ``ALL``, count and mean/median/p99 (µs) of every
    derivable component, with the batch-means 95 % CI half-width of each ALL mean;
    ``components_by_hop``: the same per hop (None with one hop); ``calls``: RFC 6076 metrics and
    the PDR (blanked, with the reason, when the input cannot tell a drop from a missing line);
    ``transactions``, ``counts``: as written; ``report``: the ingest account
    (:class:`~sipperf.timeline.IngestReport`); ``summary``: report.json's ``"summary"`` (each
    input's vantage and what follows from it, the PDR and its note); ``engine``: "in memory" or
    "streaming (...)"; ``timeline``: the tidy timeline, None when the capture was streamed;
    ``figure_t`` / ``figure_arrays``: for a streamed capture, each message's first instant and
    component values (float ns) -- in memory they are derived from ``timeline`` on demand;
    ``rows``: for a streamed capture read with ``measure_rows``, the caller side's rows with the
    columns the report measures (:func:`sipperf.analysis.stream.measure_table`)."""

    components: pd.DataFrame
    components_by_hop: pd.DataFrame | None
    calls: pd.DataFrame
    transactions: pd.DataFrame
    counts: pd.DataFrame
    report: IngestReport
    summary: dict
    engine: str
    timeline: pd.DataFrame | None = None
    figure_t: np.ndarray | None = None
    figure_arrays: dict[str, np.ndarray] | None = None
    rows: pd.DataFrame | None = None

    @property
    def streamed(self) -> bool:
        """True when no timeline was built (the streaming engine ran)."""
        return self.timeline is None

    def figure_data(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Each message's first instant (float ns, :func:`order_key`) and each component's values
        (float ns, NaN where absent) on the same rows: from the timeline, or as streamed."""
        if self.timeline is not None:
            from sipperf.components import derive_arrays

            return order_key(self.timeline), derive_arrays(self.timeline)
        return self.figure_t, self.figure_arrays

    def measure_frame(self) -> pd.DataFrame | None:
        """What :func:`sipperf.report.runs.measure` reads, whatever the engine: the timeline in
        memory, or the streamed caller-side rows (:attr:`rows`; None when the capture was streamed
        without ``measure_rows``)."""
        return self.timeline if self.timeline is not None else self.rows

    def write(self, out_dir) -> list[Path]:
        """Write components.csv (and components_by_hop.csv), calls.csv, transactions.csv,
        counts.csv and report.json into ``out_dir`` (created); returns their paths.  An
        unwritable place is an :class:`~sipperf.timeline.IngestError` naming it."""
        from sipperf.analysis.write import write_analysis

        return write_analysis(self, out_dir)

    def describe(self) -> list[str]:
        """The account as lines of text (what ``sipperf analyze`` prints before "wrote ...")."""
        from sipperf.analysis.account import describe

        return describe(self.report, self.summary, self.engine)
