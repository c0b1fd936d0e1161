"""The report: from your captures or logs to a shareable HTML page and a verdict.

* :mod:`.runs` -- which inputs form a run (``--group-by``) and what one run measured;
* :mod:`.verdict` -- the plain-words verdict (utilisation, knee, headroom, which model fits);
* :mod:`.figures` -- the Plotly figures (ECDFs, time series, load curves, α, ladders);
* :mod:`.html` -- the self-contained page (plotly.js inlined: opens from disk, offline);
* :mod:`.build` -- :func:`build_report`, what ``sipperf report`` runs.

The fitting itself (service demand, α, β, C_{1,1}) is :mod:`sipperf.fit`.
"""
from sipperf.report.build import Report, RunResult, build_report, fit_runs

__all__ = ["build_report", "fit_runs", "Report", "RunResult"]
