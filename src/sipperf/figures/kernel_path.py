"""The kernel packet path of seed 000 ch. 3: the seven instants and the time components.

:func:`thesis_breakdown` rebuilds the mean time components per call rate from the transcribed
thesis tables (``datasets/thesis``, loaded with :func:`sipperf.thesis.load_table`):

* ``k_stack`` — Table 4.3 overall mean at 1 cps (constant, §4.2.1);
* ``k_sockq_s`` — α(λ)·K^{s,base}_sockq (eq. 4.4) with α from Table 4.4/4.5 and the base from Table 4.3;
* ``k_sockq_w`` — the measured wait W = K^w_sockq of Table 4.4/4.5;
* ``k_copy`` — what remains of the measured overall K_rcv (Table 4.1/4.2) after the three above
  (eq. 3.1: K_rcv = K_stack + K^w + K^s + K_copy);
* ``t_sip`` — E[X] of Table 4.4/4.5 minus K^s, K_snd and the model's K_copy = 2 µs (eq. 4.1);
  the thesis printed T_sip only as figures, and never split T¹/T² in a table;
* ``k_snd`` — Table 4.3 overall mean.
"""
from __future__ import annotations

import pandas as pd

from sipperf.timeline import INSTANTS

from sipperf import components as _components

__all__ = ["COMPONENTS", "INSTANT_LABELS", "thesis_breakdown", "cumulative_instants",
           "interrupts_per_packet", "timeline_components", "draw_instants"]

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
#: K_copy used by the thesis's M/G/1 computation (§4.2.1: "around 2 µs")
K_COPY_MODEL_US = 2.0


def _overall(table: str, quantity: str) -> pd.Series:
    from sipperf.thesis import load_table

    d = load_table(table)
    d = d[(d["quantity"] == quantity) & (d["msg_type"].fillna("all") == "all")]
    return d.set_index(d["cps"].astype(int))["value"].astype(float)


def thesis_breakdown(arrivals: str = "poisson") -> pd.DataFrame:
    """Mean components (µs) per call rate for ``arrivals`` = "poisson" (Tables 4.1, 4.4) or
    "deterministic" (Tables 4.2, 4.5); Table 4.3 supplies K_stack, K^{s,base}_sockq and K_snd.

    Columns: cps, lam_pps, alpha, k_stack, k_sockq_w, k_sockq_s, k_copy, t_sip, k_snd, k_rcv,
    ex_us, sojourn (= k_rcv + t_sip + k_snd).
    """
    from sipperf.thesis import wide

    if arrivals not in ("poisson", "deterministic"):
        raise ValueError("arrivals must be 'poisson' or 'deterministic'")
    t_rcv, t_mg1 = ("4.1", "4.4") if arrivals == "poisson" else ("4.2", "4.5")
    m = wide(t_mg1).set_index("cps")
    k_stack = float(_overall("4.3", "k_stack_us").iloc[0])
    base = float(_overall("4.3", "k_sockq_s_base_us").iloc[0])
    k_snd = float(_overall("4.3", "k_snd_us").iloc[0])
    k_rcv = _overall(t_rcv, "k_rcv_us").reindex(m.index)
    out = pd.DataFrame({"cps": m.index.astype(int), "lam_pps": m["lam_pps"].to_numpy(),
                        "alpha": m["alpha"].to_numpy()})
    out["k_stack"] = k_stack
    out["k_sockq_w"] = m["w_measured_us"].to_numpy()
    out["k_sockq_s"] = out["alpha"] * base
    out["k_copy"] = k_rcv.to_numpy() - k_stack - out["k_sockq_w"] - out["k_sockq_s"]
    out["t_sip"] = m["ex_us"].to_numpy() - out["k_sockq_s"] - k_snd - K_COPY_MODEL_US
    out["k_snd"] = k_snd
    out["k_rcv"] = k_rcv.to_numpy()
    out["ex_us"] = m["ex_us"].to_numpy()
    out["sojourn"] = out["k_rcv"] + out["t_sip"] + out["k_snd"]
    return out


def cumulative_instants(row: pd.Series | dict) -> dict[str, float]:
    """Mean elapsed time (µs) since t_arr at each instant of one :func:`thesis_breakdown` row.

    T_sip is not split into T¹/T² in the thesis tables, so ``t_sip_c`` is omitted."""
    r = dict(row)
    t = {"t_arr": 0.0}
    t["t_stack"] = t["t_arr"] + r["k_stack"]
    t["t_sockq"] = t["t_stack"] + r["k_sockq_w"] + r["k_sockq_s"]
    t["t_sip_in"] = t["t_sockq"] + r["k_copy"]
    t["t_sip_out"] = t["t_sip_in"] + r["t_sip"]
    t["t_dep"] = t["t_sip_out"] + r["k_snd"]
    return t


def timeline_components(tl: pd.DataFrame, msg_types=None) -> pd.DataFrame:
    """Per-message components (µs, float, NaN where an instant is missing) of a timeline
    (:mod:`sipperf.timeline` schema): one column per entry of :data:`COMPONENTS` plus ``msg_type``.
    ``msg_types`` keeps only those message types (default: the six of the call flow)."""
    from sipperf.timeline import CALL_FLOW

    keep = list(CALL_FLOW if msg_types is None else msg_types)
    t = tl[tl["msg_type"].isin(keep)]
    out = pd.DataFrame({name: (t[b] - t[a]).astype("Float64").astype("float64") / 1e3
                        for name, (a, b) in COMPONENTS.items()}, index=t.index)
    out.insert(0, "msg_type", t["msg_type"].astype(str))
    return out.reset_index(drop=True)


def interrupts_per_packet() -> pd.DataFrame:
    """Appendix B: interrupts/s (all CPUs and CPU 0) per call rate, divided by the packet rate
    into the proxy (6 messages per call).  Columns: cps, lam_pps, intr_all, intr_cpu0,
    per_packet_all, per_packet_cpu0."""
    from sipperf.thesis import load_table

    d = load_table("B")
    d = d[d["quantity"] == "intr_per_s"]
    piv = d.pivot_table(index="cps", columns="cpu", values="value").reset_index()
    out = pd.DataFrame({"cps": piv["cps"].astype(int), "lam_pps": 6.0 * piv["cps"].astype(float),
                        "intr_all": piv["all"], "intr_cpu0": piv["0"]})
    out["per_packet_all"] = out["intr_all"] / out["lam_pps"]
    out["per_packet_cpu0"] = out["intr_cpu0"] / out["lam_pps"]
    return out


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

