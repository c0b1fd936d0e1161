"""Drawing the kernel packet path of seed 000 ch. 3: the seven instants and the components between them.

The time budget drawn on it comes from :func:`sipperf.audit.thesis_breakdown` (the thesis's
tables) or from a timeline (:mod:`sipperf.components`).
"""
from __future__ import annotations

import pandas as pd

from sipperf import components as _components
from sipperf.timeline import INSTANTS

__all__ = ["COMPONENTS", "INSTANT_LABELS", "cumulative_instants", "draw_instants"]

#: the six consecutive components along the path, each as (earlier, later) instant
#: (thesis eq. 3.1–3.3); the definitions themselves live in :mod:`sipperf.components`
COMPONENTS: dict[str, tuple[str, str]] = {
    name: (_components.COMPONENTS[name][1], _components.COMPONENTS[name][0])
    for name in ("k_stack", "k_sockq", "k_copy", "t_sip1", "t_sip2", "k_snd")
}
INSTANT_LABELS: dict[str, str] = {
    "t_arr": "$t_{arr}$", "t_stack": "$t_{stack}$", "t_sockq": "$t_{sockq}$", "t_sip_in": "$t_{sip,in}$",
    "t_sip_c": "$t_{sip,c}$", "t_sip_out": "$t_{sip,out}$", "t_dep": "$t_{dep}$",
}


def cumulative_instants(row: pd.Series | dict) -> dict[str, float]:
    """Mean elapsed time (µs) since t_arr at each instant of one row of
    :func:`sipperf.audit.thesis_breakdown` (where the figure puts each instant).

    T_sip is not split into T¹/T² in the thesis tables, so ``t_sip_c`` is omitted."""
    r = dict(row)
    t = {"t_arr": 0.0}
    t["t_stack"] = t["t_arr"] + r["k_stack"]
    t["t_sockq"] = t["t_stack"] + r["k_sockq_w"] + r["k_sockq_s"]
    t["t_sip_in"] = t["t_sockq"] + r["k_copy"]
    t["t_sip_out"] = t["t_sip_in"] + r["t_sip"]
    t["t_dep"] = t["t_sip_out"] + r["k_snd"]
    return t


def draw_instants(ax=None, durations_us: dict[str, float] | None = None):
    """The seven instants t_arr … t_dep on a schematic time axis, with the component between
    each pair bracketed (equal widths: the real durations differ by orders of magnitude, so
    ``durations_us`` — component -> µs — is written under each bracket instead)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3.4))
    xs = {name: float(i) for i, name in enumerate(INSTANTS)}
    ax.axhline(0, color="black", lw=1.2)
    ax.annotate("", xy=(len(INSTANTS) - 0.4, 0), xytext=(len(INSTANTS) - 0.6, 0),
                arrowprops={"arrowstyle": "->", "lw": 1.2})
    where = {"t_arr": "NIC / netif_receive_skb", "t_stack": "socket queue append",
             "t_sockq": "recvfrom entered", "t_sip_in": "recvfrom returned",
             "t_sip_c": "parse + lookup done", "t_sip_out": "sendto entered", "t_dep": "sendto returned"}
    for name, x in xs.items():
        ax.plot([x, x], [-0.12, 0.12], color="black", lw=1.5)
        ax.text(x, 0.2, INSTANT_LABELS[name], ha="center", va="bottom", fontsize=11)
        ax.text(x, 0.55, where[name], ha="center", va="bottom", fontsize=7, rotation=20, color="0.3")
    colours = {"k_stack": "tab:gray", "k_sockq": "tab:red", "k_copy": "tab:purple",
               "t_sip1": "tab:blue", "t_sip2": "tab:cyan", "k_snd": "tab:green"}
    texnames = {"k_stack": "$K_{stack}$", "k_sockq": "$K^w_{sockq}+K^s_{sockq}$", "k_copy": "$K_{copy}$",
                "t_sip1": "$T^1_{sip}$", "t_sip2": "$T^2_{sip}$", "k_snd": "$K_{snd}$"}
    for comp, (a, b) in COMPONENTS.items():
        xa, xb = xs[a] + 0.05, xs[b] - 0.05
        ax.fill_between([xa, xb], -0.45, -0.2, color=colours[comp], alpha=0.35, lw=0)
        ax.text((xa + xb) / 2, -0.33, texnames[comp], ha="center", va="center", fontsize=9)
        if durations_us and comp in durations_us:
            ax.text((xa + xb) / 2, -0.62, f"{durations_us[comp]:.1f} µs", ha="center", va="center", fontsize=8)
    ax.annotate("", xy=(xs["t_sip_in"], -0.85), xytext=(xs["t_arr"], -0.85),
                arrowprops={"arrowstyle": "<->", "color": "tab:red"})
    ax.text((xs["t_arr"] + xs["t_sip_in"]) / 2, -0.97, "$K_{rcv}$ (receive path)", ha="center", va="top", fontsize=9)
    ax.annotate("", xy=(xs["t_dep"], -1.3), xytext=(xs["t_stack"], -1.3),
                arrowprops={"arrowstyle": "<->", "color": "tab:blue"})
    ax.text((xs["t_stack"] + xs["t_dep"]) / 2, -1.42, "queue + service $X$ (M/G/1 of ch. 5)", ha="center",
            va="top", fontsize=9)
    ax.set_xlim(-0.5, len(INSTANTS) - 0.3)
    ax.set_ylim(-1.75, 1.2)
    ax.axis("off")
    return ax

