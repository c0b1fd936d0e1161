"""The analysis pipeline: inputs -> timeline -> components -> calls -> tables, with an account.

``analyze(paths)`` (:mod:`.pipeline`) reads logs and captures (any mix of formats) and returns an
:class:`Analysis` (:mod:`.result`): the tables and the account, nothing written.  Asked for
separately, ``Analysis.write(DIR)`` (:mod:`.write`) writes into ``DIR``:

* ``components.csv``: one row per msg_type plus ``ALL``: count and mean/median/p99 in µs of
  every derivable component, incl. ``sojourn``; plus the batch-means 95% CI half-width of each
  ALL mean (a capture at an endpoint has no component: counts only);
* ``components_by_hop.csv`` (several hops in one capture): the same per hop;
* ``calls.csv``: RFC 6076 metrics and the PDR (:mod:`sipperf.calls`), at the caller side;
* ``transactions.csv``: request -> response times per transaction type, retransmissions apart;
* ``counts.csv``: messages by method / status (and, at a proxy, by disposition);
* ``report.json``: the ingest account (read, parsed, skipped by reason, per input file), what
  each capture's vantage point is and what follows from it, and the drop rule's counts;

and :func:`sipperf.figures.analysis_figs.write_figures` draws ``components.png`` /
``timeline.png`` (``transactions.png`` at an endpoint).  ``sipperf analyze PATH... --out DIR``
does all three.

Large captures are streamed (bounded memory, the same numbers: :mod:`.stream`); the files of a
ring buffer (``dumpcap -b``: PREFIX_NNNNN_YYYYmmddHHMMSS.pcapng) are one capture, read in
parallel on Dask (``workers``, ``scheduler``) and paired across files.  Unusable input (or an
unusable output directory, ``proxy`` or ``workers``) is an :class:`~sipperf.timeline.IngestError`
naming the file and position.
"""
from sipperf.analysis.pipeline import analyze, check_options
from sipperf.analysis.result import Analysis
from sipperf.analysis.write import prepare_out_dir

__all__ = ["analyze", "Analysis", "check_options", "prepare_out_dir"]
