"""The ladder (sequence) diagram of the thesis call flow (seed 000 Fig. 2.2; RFC 3261).

A call through a record-routing proxy produces six SIP messages, each of which crosses the
proxy once (in on one side, out on the other): INVITE, 180 Ringing, 200 OK (INVITE), ACK,
BYE, 200 OK (BYE).  The message-type names are those of :data:`sipperf.timeline.CALL_FLOW`.
"""
from __future__ import annotations

from sipperf.timeline import CALL_FLOW

__all__ = ["draw_ladder", "LABELS"]

#: printed label of each message type
LABELS: dict[str, str] = {
    "INVITE": "INVITE", "180": "180 Ringing", "200-INVITE": "200 OK (INVITE)",
    "ACK": "ACK", "BYE": "BYE", "200-BYE": "200 OK (BYE)",
}
#: who sends each message type: requests from the caller (UAC), responses from the callee (UAS)
_SENDER: dict[str, str] = {"INVITE": "UAC", "180": "UAS", "200-INVITE": "UAS",
                           "ACK": "UAC", "BYE": "UAC", "200-BYE": "UAS"}


def draw_ladder(ax=None, *, proxy_us: dict[str, float] | None = None, hold_gap: float = 1.2,
                trying: bool = False):
    """Draw the ladder diagram of one call on ``ax`` (a new figure if None); returns the axis.

    Time runs downwards in arbitrary units; ``proxy_us`` (message type -> µs) annotates the time
    each message spends inside the proxy, e.g. the thesis's measured means.  ``trying`` adds the
    hop-by-hop 100 Trying a transaction-stateful proxy sends back to the caller (dashed).
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 6.2))
    xs = {"UAC": 0.0, "Proxy": 1.0, "UAS": 2.0}
    names = {"UAC": "UAC (caller)\nSIPp", "Proxy": "SIP proxy\nOpenSIPS / Kamailio", "UAS": "UAS (callee)\nSIPp"}
    y = 0.0
    rows = []
    for i, m in enumerate(CALL_FLOW):
        if m == "BYE":
            y += hold_gap  # the call is up: no SIP traffic during the holding time
            hold_y = y - hold_gap / 2
        rows.append((m, y))
        y += 1.0
    y_end = y
    for who, x in xs.items():
        ax.plot([x, x], [-0.6, y_end], color="0.55", lw=1.2, zorder=0)
        ax.text(x, -0.75, names[who], ha="center", va="bottom", fontsize=9, weight="bold")
    ax.add_patch(plt.Rectangle((0.96, -0.5), 0.08, y_end + 0.4, color="tab:orange", alpha=0.15, lw=0))
    for m, y0 in rows:
        a = _SENDER[m]
        b = "UAS" if a == "UAC" else "UAC"
        colour = "tab:blue" if a == "UAC" else "tab:green"
        ax.annotate("", xy=(xs["Proxy"], y0 + 0.3), xytext=(xs[a], y0),
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.5})
        ax.annotate("", xy=(xs[b], y0 + 0.6), xytext=(xs["Proxy"], y0 + 0.4),
                    arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.5})
        xa = (xs[a] + xs["Proxy"]) / 2
        ax.text(xa, y0 + 0.1, LABELS[m], ha="center", va="bottom", fontsize=9, color=colour)
        if trying and m == "INVITE":
            ax.annotate("", xy=(xs["UAC"], y0 + 0.75), xytext=(xs["Proxy"], y0 + 0.55),
                        arrowprops={"arrowstyle": "->", "color": "0.45", "lw": 1.1, "linestyle": "--"})
            ax.text(0.5, y0 + 0.62, "100 Trying", ha="center", va="bottom", fontsize=8, color="0.45")
        if proxy_us is not None and m in proxy_us:
            ax.text(1.06, y0 + 0.35, f"{proxy_us[m]:.0f} µs", fontsize=8, va="center", color="tab:red")
    ax.text(0.5, hold_y, "call holding time\n(media flows end to end, no SIP)", ha="center", va="center",
            fontsize=8, style="italic", color="0.35")
    ax.set_xlim(-0.35, 2.35)
    ax.set_ylim(y_end + 0.1, -1.3)
    ax.axis("off")
    return ax

