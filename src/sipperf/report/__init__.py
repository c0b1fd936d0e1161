"""The report: from your captures or logs to a shareable HTML page and a verdict.

* :mod:`.runs` -- which inputs form a run (``--group-by``) and what one run measured;
* :mod:`.result` -- :class:`Report` and :class:`RunResult`, runs.csv and fit.json as tables;
* :mod:`.verdict` -- the plain-words verdict (utilisation, knee, headroom, which model fits);
* :mod:`.figures` -- the Plotly figures (ECDFs, time series, load curves, α, ladders);
* :mod:`.tables` -- the report's tables with human headers (HTML page, notebook, book);
* :mod:`.html` -- the self-contained page (plotly.js inlined: opens from disk, offline);
* :mod:`.build` -- :func:`build_report`, what ``sipperf report`` runs, and :func:`fit_summary`,
  what ``sipperf fit`` prints;
* :mod:`.options` -- the run options the two commands share.

The fitting itself (service demand, α, β, C_{1,1}) is :mod:`sipperf.fit`; each run is read by
:func:`sipperf.analysis.analyze`.
"""
__all__ = ["build_report", "fit_runs", "fit_summary", "Report", "RunResult"]


def __getattr__(name: str):
    """The names above, imported on first use: ``import sipperf.report.options`` (what the
    commands need to declare their options) stays cheap."""
    if name in ("build_report", "fit_runs", "fit_summary"):
        from sipperf.report import build

        return getattr(build, name)
    if name in ("Report", "RunResult"):
        from sipperf.report import result

        return getattr(result, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
