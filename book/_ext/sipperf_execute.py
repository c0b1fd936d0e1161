"""Chapter execution that cannot stall silently: used by :mod:`sipperf_book` at build time.

Three measures, all applied to myst-nb's executor (``execute_notebooks: cache`` or ``force``,
both of which run each chapter through ``jupyter_cache``'s ``single_nb_execution``):

1. ``SIPPERF_STATIC=1`` is put in the build's environment, so the chapters' kernels (which
   inherit it) never create live ipywidgets (:mod:`sipperf.widgets`).  nbclient stands in for
   a frontend's widget manager and answers an ``Output`` widget's messages on the shell
   channel; on a busy machine that made it miss the wake-up for the cell's reply, and the
   chapter sat idle until the per-cell timeout, then carried on as if nothing had happened.
2. The kernel client polls its channels in slices of :data:`POLL_SLICE_S`: pyzmq's
   edge-triggered socket notification can be lost, and a lost one now costs at most one slice
   instead of the whole timeout.
3. A per-chapter time budget (``sipperf_chapter_timeout`` in ``_config.yml``'s
   ``sphinx.config``, seconds; 0 = none) on top of the per-cell ``execute.timeout``: each
   cell may use what is left of its chapter's budget, so a chapter that runs far longer than
   usual fails with ``CellTimeoutError`` naming the cell, and ``-W`` fails the build.  A
   chapter that needs more sets its own in its front matter: ``sipperf: {chapter_timeout: 900}``.

It also drops, from the executed chapter, the Plotly JSON of outputs that carry the same figure
as HTML too (:func:`sipperf.viz.show`): the static book draws the HTML, Sphinx has no use for
the JSON (and myst-nb would warn about a mime type it cannot render).
"""
from __future__ import annotations

import os
from queue import Empty
from time import monotonic

from jupyter_client import AsyncKernelManager
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from traitlets import Type

#: longest single wait on a kernel channel, seconds
POLL_SLICE_S = 1.0
#: the variable sipperf.widgets reads (its STATIC_ENV)
STATIC_ENV = "SIPPERF_STATIC"
#: for live frontends only; sipperf.viz.show sends the figure as text/html as well
LIVE_ONLY_MIME = ("application/vnd.plotly.v1+json",)


class SlicedChannel(AsyncZMQSocketChannel):
    """A kernel channel whose ``get_msg`` re-polls the socket at least every
    :data:`POLL_SLICE_S` seconds until its own timeout."""

    async def get_msg(self, timeout: float | None = None):
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            left = POLL_SLICE_S if deadline is None else max(0.0, min(POLL_SLICE_S, deadline - monotonic()))
            try:
                return await super().get_msg(timeout=left)
            except Empty:
                if deadline is not None and monotonic() >= deadline:
                    raise


class SlicedKernelClient(AsyncKernelClient):
    shell_channel_class = Type(SlicedChannel)
    iopub_channel_class = Type(SlicedChannel)


class SlicedKernelManager(AsyncKernelManager):
    client_factory = Type(SlicedKernelClient, klass=AsyncKernelClient)


def _budgeted(run, chapter_timeout_s: float):
    """Wrap ``single_nb_execution``: sliced polling, and each cell's timeout capped by what is
    left of the chapter's budget."""

    def single_nb_execution(nb, cwd, timeout, allow_errors, meta_override=True, **kwargs):
        if meta_override and "timeout" in nb.metadata.get("execution", {}):
            timeout = nb.metadata.execution.timeout  # a chapter's own per-cell timeout wins
        cell_cap = float(timeout) if timeout and timeout > 0 else None
        budget = float(nb.metadata.get("sipperf", {}).get("chapter_timeout", chapter_timeout_s) or 0)
        deadline = monotonic() + budget if budget > 0 else None

        def timeout_func(cell):
            caps = [c for c in (cell_cap, None if deadline is None else deadline - monotonic())
                    if c is not None]
            return max(1, int(min(caps))) if caps else None

        kwargs.setdefault("kernel_manager_class", SlicedKernelManager)
        kwargs.setdefault("timeout_func", timeout_func)
        result = run(nb, cwd, timeout, allow_errors, meta_override=meta_override, **kwargs)
        if result.err is not None and type(result.err).__name__ == "CellTimeoutError" \
                and deadline is not None and monotonic() >= deadline - 1:
            result.exc_string = (f"chapter time budget of {budget:g} s used up (sipperf_chapter_timeout "
                                 f"in _config.yml, or sipperf.chapter_timeout in the chapter)\n"
                                 + (result.exc_string or ""))
        _drop_live_only(result.nb)
        return result

    return single_nb_execution


def _drop_live_only(nb) -> None:
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = out.get("data")
            if data and "text/html" in data:
                for mime in LIVE_ONLY_MIME:
                    data.pop(mime, None)


def install(app, config) -> None:
    """``config-inited`` handler: put the three measures in place for this build."""
    os.environ[STATIC_ENV] = "1"
    from myst_nb.core.execute import cache, direct

    budget = float(config.sipperf_chapter_timeout or 0)
    for mod in (cache, direct):
        run = getattr(mod.single_nb_execution, "__wrapped__", mod.single_nb_execution)
        wrapped = _budgeted(run, budget)
        wrapped.__wrapped__ = run
        mod.single_nb_execution = wrapped
