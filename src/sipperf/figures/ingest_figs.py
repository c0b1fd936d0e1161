"""Drawing for the ingest chapter (ch. 4): one measured call as a ladder diagram.

The call's messages come from :func:`sipperf.calls.call_messages`.
"""
from __future__ import annotations

import pandas as pd

from sipperf.figures.ladder import draw_ladder
from sipperf.timeline import CALL_FLOW

__all__ = ["draw_call_ladder"]


def draw_call_ladder(msgs: pd.DataFrame, ax=None, *, trying: bool = True):
    """Ladder diagram of one measured call (output of :func:`sipperf.calls.call_messages`).

    Reuses :func:`sipperf.figures.ladder.draw_ladder`, annotating each message's time inside the
    proxy (µs, red) and, on the caller's side, when it reached the proxy (ms after the INVITE)."""
    first = msgs.drop_duplicates("msg_type").set_index("msg_type")
    ax = draw_ladder(ax, proxy_us=first["in_proxy_us"].to_dict(), trying=trying)
    # the rows of draw_ladder: one unit per message, the holding gap before BYE
    y, hold = 0.0, 1.2
    for m in CALL_FLOW:
        if m == "BYE":
            y += hold
        if m in first.index:
            ax.text(-0.33, y + 0.05, f"t = {first.loc[m, 't_in_ms']:.2f} ms", fontsize=7.5,
                    color="0.3", va="center", ha="left")
        y += 1.0
    return ax
