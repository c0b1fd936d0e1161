"""Drawing code for the book's chapters: matplotlib helpers that only draw.

Every number a figure shows is computed by the chapter with the library's public API
(:mod:`sipperf.models`, :mod:`sipperf.thesis`, :mod:`sipperf.audit`, :mod:`sipperf.sim`, ...);
these modules only lay it out on an axis:

* :mod:`.ladder` — the ladder diagram of the six-message call flow (ch. 1)
* :mod:`.kernel_path` — the seven instants of the kernel path and the components between them (ch. 2)
* :mod:`.ingest_figs` — one measured call as a ladder diagram (ch. 4)
* :mod:`.analysis_figs` — the quick-look figures of ``sipperf analyze``
"""
