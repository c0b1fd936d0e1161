"""One-off transcription of the thesis's numeric tables (seed 000) into tidy CSV.

Usage (by hand, once; never run by the build, the tests or the package)::

    python datasets/thesis/transcribe.py PATH/TO/000_*.txt datasets/thesis

The seed's text extraction holds each table as a block of tab-separated lines.  This
script locates each block after its caption line, maps every printed cell to one tidy
row (keys + quantity + value), keeps the printed string verbatim in ``text`` and writes
one CSV per table plus ``tables.json``.  The per-table specification (which printed row
is which quantity, its unit and role) is the hand-made part; README.md documents it and
every doubt found while checking the output against the text by eye.
"""
from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

COLUMNS = ["table", "row", "column", "quantity", "role", "msg_type", "arrivals", "mode", "cores",
           "threads", "cps", "pdr_threshold", "cpu", "value", "text", "unit", "bold", "note"]

MSG_TYPES = {"INVITE": "INVITE", "180 Ringing": "180", "200 OK (INVITE)": "200_INVITE",
             "ACK": "ACK", "BYE": "BYE", "200 OK (BYE)": "200_BYE", "Overall Mean": "all"}

# table id -> (caption, page in the list of tables)
CAPTIONS = {
    "4.1": ("Measured Mean Values and Confidence Intervals for K_rcv, and Poisson Inter-Arrivals (µs)", 30),
    "4.2": ("Measured Mean Values and Confidence Intervals for K_rcv, Deterministic Inter-Arrivals (µs)", 31),
    "4.3": ("Measured Mean Values (in µs) at 1 cps", 41),
    "4.4": ("Waiting Times (in µs): Measured vs. Analytical, Poisson Inter-Arrivals", 42),
    "4.5": ("Waiting Times (in µs): Measured vs. Analytical, Deterministic Inter-Arrivals", 42),
    "5.1": ("Waiting Time (µs): Measured vs Analytical, Exponential Inter-Arrival Times SPS on 1 core 1-Server, K=200", 54),
    "5.2": ("Drop probability Analytical vs. Drop Rate Measured, SPS with 2-Server, K=200", 56),
    "5.3": ("Drop probability Analytical vs. Drop Rate Measured, SPS with 4-Server, K=200", 56),
    "5.4": ("Drop probability Analytical vs. Drop Rate Measured, SPS with 6-Server, K=200", 56),
    "5.5": ("Drop probability Analytical vs. Drop Rate Measured, SPS with 8-Server, K=200", 57),
    "5.6": ("Drop probability Analytical vs. Drop Rate Measured, SPS with 16-Server, K=200", 57),
    "6.1": ("Measured SPS Performance, 1% PDR, Baseline Server Mode", 69),
    "6.2": ("Measured SPS Performance, 1% PDR, Enhanced Server Mode", 69),
    "6.3": ("PDR at 1% And Kernel Time (K_rcv) Comparison", 70),
    "6.4": ("Measured SPS Performance, 2% PDR, Baseline Server Mode", 71),
    "6.5": ("Measured SPS Performance, 2% PDR, Enhanced Server Mode", 71),
    "6.6": ("PDR at 2% And Kernel Time (K_rcv) Comparison", 71),
    "6.7": ("Measured SPS Performance, 5% PDR, Baseline Server Mode", 72),
    "6.8": ("Measured SPS Performance, 5% Drop-Rate, Enhanced Server Mode", 72),
    "6.9": ("PDR at 5% And Kernel Time (K_rcv) Comparison", 72),
    "7.1": ("Measured SPS Performance, Baseline Multi-core Server Mode, SPS on 2-Core", 82),
    "7.2": ("Measured SPS Performance, Enhanced Multi-core Server Mode, SPS on 2-Core", 82),
    "7.3": ("Drop rate And Kernel Time (K_rcv) Comparison, SPS on 2-Core", 83),
    "7.4": ("Measured SPS Performance, Baseline Multi-core Server Mode, SPS on 4-Core", 83),
    "7.5": ("Measured SPS Performance, Enhanced Multi-core Server Mode, SPS on 4-Core", 84),
    "7.6": ("Drop rate And Kernel Time (K_rcv) Comparison, SPS on 4-Core", 84),
    "7.7": ("Measured SPS Performance, Baseline Multi-core Server Mode, SPS on 6-Core", 85),
    "7.8": ("Measured SPS Performance, Enhanced Multi-core Server Mode, SPS on 6-Core", 86),
    "7.9": ("Drop rate And Kernel Time (K_rcv) Comparison, SPS on 6-Core", 86),
    "B": ("Call Arrival Rate and Number of Interrupts (mpstat intr/s per CPU)", 112),
}


# Cell-level doubts found while checking the transcription: (table, quantity, column) -> note.
# The printed value is kept verbatim; the note says what is odd.  README.md has the evidence.
NOTES = {
    ("5.1", "lam_pps", "3000cps"): "measured arrival rate (6 x 3000 = 18000 offered); asterisk unexplained",
    ("5.1", "lam_pps", "4000cps"): "measured arrival rate (6 x 4000 = 24000 offered); asterisk unexplained",
    ("5.3", "drop_prob_model", "2000cps"): "M/M/c/K with the printed lambda 12000 and E[X] 337.0 (c = 4, K = 200) gives 0.0123; 0.0110 needs E[X] = 336.46",
    ("5.3", "drop_prob_model", "2200cps"): "7.2 times the measured 0.01595; it is what M/M/c/K gives for the printed E[X] (rho > 1), not a typo",
    ("6.1", "pdr", "8 Threads, 1600cps"): "drops/messages = 1895/313721 = 0.00604, printed 0.0052",
    ("6.3", "pdr_pct_lower", "4 Threads, 2200cps"): "(0.0157-0.0115)/0.0157 = 26.75 %, printed 26.4 %",
    ("6.4", "lam_pps", "4 Threads, 2200cps"): "ten times its neighbours: 6 x 2200 = 13200",
    ("6.4", "t_sip_us", "4 Threads, 2200cps"): "same configuration in Table 6.1 reads 146.25",
    ("6.4", "k_rcv_us", "4 Threads, 2200cps"): "same configuration in Tables 6.1/6.3 reads 2184.27",
    **{("6.4", q, "16 Threads, 1600cps"): "equals Table 6.1's 16-thread 1400 cps column (all six measured cells); "
                                          "only lambda follows the label"
       for q in ("t_sip_us", "k_rcv_us", "call_setup_drops", "call_setup_messages", "total_messages", "pdr")},
    ("6.5", "lam_pps", "16 Threads, 1400cps"): "6 x 1400 = 8400; 9600 is 6 x 1600 (column label or rate shifted by 200 cps)",
    ("6.5", "lam_pps", "16 Threads, 1600cps"): "6 x 1600 = 9600; 10800 is 6 x 1800, and Table 6.6 quotes this column as 1800 cps",
    ("6.5", "call_setup_drops", "16 Threads, 1400cps"): "equals Table 6.2's 16-thread 1600 cps column; drops/messages = 0.0233, printed PDR 0.0081",
    ("6.5", "call_setup_messages", "16 Threads, 1400cps"): "equals Table 6.2's 16-thread 1600 cps column",
    ("6.5", "total_messages", "16 Threads, 1400cps"): "equals Table 6.2's 16-thread 1400 cps column (its 1600 cps total is 363775)",
    ("6.7", "pdr", "4 Threads, 2800cps"): "drops/messages = 25563/495007 = 0.0516, printed 0.0666",
    ("6.8", "pdr", "6 Threads, 2400cps"): "drops/messages = 19745/420969 = 0.0469, printed 0.0453",
    ("6.8", "pdr", "8 Threads, 2200cps"): "drops/messages = 14598/381532 = 0.0383, printed 0.030 (= Table 6.5's 11567/384919)",
    ("7.1", "pdr", "4 Threads, 3600cps"): "drops/messages = 2206/322212 = 0.00685, printed 0.0053",
    ("7.2", "call_setup_messages", "2 Threads, 4000cps"): "about twice every other column (~320 000); PDR is consistent with it",
    ("7.2", "total_messages", "2 Threads, 4000cps"): "about twice every other column (~370 000)",
    ("7.3", "k_rcv_us", "16 Threads, 2600cps"): "enhanced; Table 7.2 reads 398.73 for the same configuration (one digit)",
}


def parse_number(text: str) -> tuple[float | None, str, bool, str]:
    """Printed cell -> (value, verbatim text, bold, note)."""
    raw = text.strip()
    bold = raw.startswith("<b>")
    t = re.sub(r"</?b>", "", raw).strip()
    note = ""
    if t in ("N/A", ""):
        return None, t, bold, ""
    s = t
    if s.endswith("*"):
        s = s[:-1]
        note = "printed with an asterisk (no footnote in the text)"
    if s.endswith("%"):
        s = s[:-1]
        if s.endswith(" "):
            note = "printed with a space before the percent sign"
        s = s.strip()
    if "," in s:
        s = s.replace(",", "")
    if s.startswith("."):
        note = (note + "; " if note else "") + "printed without a leading zero"
    return float(s), t, bold, note


def block_after(lines: list[str], caption_prefix: str) -> list[list[str]]:
    """Tab-separated lines of the first table block after the caption line."""
    start = next(i for i, ln in enumerate(lines) if ln.startswith(caption_prefix))
    out: list[list[str]] = []
    i = start + 1
    while i < len(lines) and "\t" not in lines[i]:
        i += 1
    while i < len(lines) and "\t" in lines[i]:
        out.append(lines[i].split("\t"))
        i += 1
    return out


def cps_of(label: str) -> int:
    return int(re.match(r"\s*(\d+)\s*cps", label).group(1))


def row(table: str, **kw) -> dict:
    r = {c: "" for c in COLUMNS}
    r["table"] = table
    r.update({k: ("" if v is None else v) for k, v in kw.items()})
    return r


def emit(rows: list, table: str, rowlabel: str, collabel: str, cell: str, quantity: str, role: str,
         unit: str, **keys) -> None:
    value, text, bold, note = parse_number(cell)
    if text == "" and value is None:
        return  # empty cell in the printed table: no datum
    extra = NOTES.get((table, quantity, collabel)) or NOTES.get((table, quantity, rowlabel), "")
    if extra.startswith("enhanced;") and keys.get("mode") != "enhanced":
        extra = ""
    if table == "5.1" and quantity == "lam_pps" and "*" not in text:
        role = "derived"
    note = "; ".join(x for x in (note, extra) if x)
    rows.append(row(table, row=rowlabel, column=collabel, quantity=quantity, role=role,
                    value="" if value is None else repr(value), text=text, unit=unit,
                    bold="1" if bold else "0", note=note, **keys))


def t41(lines, tid, arrivals):
    blk = block_after(lines, f"Table {tid}:")
    cps = [cps_of(c) for c in blk[1][1:]]
    rows: list = []
    for r in blk[2:]:
        label = r[0].strip()
        for c, cell in zip(cps, r[1:]):
            col = f"{c}cps"
            if label in MSG_TYPES:
                emit(rows, tid, label, col, cell, "k_rcv_us", "measured", "us",
                     msg_type=MSG_TYPES[label], arrivals=arrivals, cps=c, cores=1, threads=1)
            elif label.startswith("Conf. Int."):
                emit(rows, tid, label, col, cell, "k_rcv_ci_halfwidth_us", "measured", "us",
                     msg_type="all", arrivals=arrivals, cps=c, cores=1, threads=1)
            elif label.startswith("# Messages"):
                emit(rows, tid, label, col, cell, "messages_to_sip", "measured", "count",
                     msg_type="all", arrivals=arrivals, cps=c, cores=1, threads=1)
            else:
                raise ValueError(label)
    return rows


def t43(lines):
    blk = block_after(lines, "Table 4.3:")
    cols = [("Packet Size (B)", "packet_size_b", "bytes"), ("K_stack", "k_stack_us", "us"),
            ("K_sockq^{s,base}", "k_sockq_s_base_us", "us"), ("K_snd", "k_snd_us", "us")]
    rows: list = []
    for r in blk[1:]:
        label = r[0].strip()
        for (col, q, unit), cell in zip(cols, r[1:]):
            if label in MSG_TYPES:
                emit(rows, "4.3", label, col, cell, q, "measured", unit, msg_type=MSG_TYPES[label],
                     cps=1, cores=1, threads=1)
            elif label.startswith("Conf. Interval"):
                emit(rows, "4.3", label, col, cell, q.replace("_us", "_ci_halfwidth_us"), "measured",
                     unit, msg_type="all", cps=1, cores=1, threads=1)
            else:
                raise ValueError(label)
    return rows


def model_rows(lines, tid, spec, **keys):
    """Tables whose printed rows are model parameters and whose columns are call rates."""
    blk = block_after(lines, f"Table {tid}:")
    cps = [cps_of(c) for c in blk[1][1:]]
    rows: list = []
    body = blk[2:]
    if len(body) != len(spec):
        raise ValueError((tid, len(body), len(spec)))
    for r, (q, role, unit) in zip(body, spec):
        label = MODEL_LABELS[q].replace("{c}", str(keys.get("threads", 1)))
        for c, cell in zip(cps, r[1:]):
            emit(rows, tid, label, f"{c}cps", cell, q, role, unit, cps=c, **keys)
    return rows


SPEC_44 = [("lam_pps", "derived", "pps"), ("alpha", "model", "1"), ("ex_us", "input", "us"),
           ("rho", "derived", "1"), ("w_model_us", "model", "us"), ("w_measured_us", "measured", "us")]
SPEC_51 = [("lam_pps", "input", "pps"), ("alpha", "input", "1"), ("beta", "input", "1"),
           ("ex_us", "input", "us"), ("rho", "derived", "1"), ("w_model_us", "model", "us"),
           ("w_measured_us", "measured", "us"), ("total_messages", "measured", "count"),
           ("rcv_errors", "measured", "count"), ("drop_rate", "derived", "1")]
SPEC_52 = [("lam_pps", "derived", "pps"), ("beta", "model", "1"), ("ex_us", "model", "us"),
           ("c_ex1_us", "input", "us"), ("drop_prob_model", "model", "1"),
           ("total_messages", "measured", "count"), ("rcv_errors", "measured", "count"),
           ("drop_rate", "derived", "1")]

# plain-text row labels for the printed (LaTeX) row headers of the model tables
MODEL_LABELS = {"lam_pps": "lambda (packets/sec)", "alpha": "alpha(lambda)", "beta": "beta(lambda, c)",
                "ex_us": "E[X]", "c_ex1_us": "E[X_{c}]", "rho": "rho = lambda E[X]",
                "w_model_us": "W (model)", "w_measured_us": "W (measured) = K_sockq^w",
                "total_messages": "TotalMessages", "rcv_errors": "RCVErrors", "drop_rate": "Droprate",
                "drop_prob_model": "DropProbability(model)"}

MEAS_Q = {"Arrival rate (packets/sec)": ("lam_pps", "derived", "pps"),
          "$T_{sip}$ ( $\\mu s$ )": ("t_sip_us", "measured", "us"),
          "$T_{sip}$ ( $\\mu$ s)": ("t_sip_us", "measured", "us"),
          "$K_{rcv}$ ( $\\mu s$ )": ("k_rcv_us", "measured", "us"),
          "$K_{rcv}$ ( $\\mu$ s)": ("k_rcv_us", "measured", "us"),
          "RCV Errors": ("rcv_errors", "measured", "count"),
          "Call-Setup Drops": ("call_setup_drops", "measured", "count"),
          "Call-setup Drops": ("call_setup_drops", "measured", "count"),
          "Call-Setup Messages": ("call_setup_messages", "measured", "count"),
          "Call-setup Messages": ("call_setup_messages", "measured", "count"),
          "Total Messages": ("total_messages", "measured", "count"),
          "PDR": ("pdr", "derived", "1")}
PLAIN = {"lam_pps": "Arrival rate (packets/sec)", "t_sip_us": "T_sip (us)", "k_rcv_us": "K_rcv (us)"}


def measured_sps(lines, tid, mode, cores, pdr_threshold):
    blk = block_after(lines, f"Table {tid}:")
    groups = [g.strip() for g in blk[1][1:]]
    threads = [int(re.match(r"(\d+) Threads", g).group(1)) for g in groups if g]
    threads = [t for t in threads for _ in (0, 1)]
    cps = [cps_of(c) for c in blk[2][1:]]
    if len(threads) != len(cps):
        raise ValueError(tid)
    rows: list = []
    for r in blk[3:]:
        label = r[0].strip()
        q, role, unit = MEAS_Q[label]
        for th, c, cell in zip(threads, cps, r[1:]):
            emit(rows, tid, PLAIN.get(q, label), f"{th} Threads, {c}cps", cell, q, role, unit, mode=mode,
                 cores=cores, threads=th, cps=c, pdr_threshold=pdr_threshold)
    return rows


def comparison(lines, tid, cores, pdr_threshold):
    blk = block_after(lines, f"Table {tid}:")
    cols = [("PDR, Baseline Mode", "pdr", "baseline", "1"), ("PDR, Enhanced Mode", "pdr", "enhanced", "1"),
            ("PDR, %Lower", "pdr_pct_lower", "", "percent"),
            ("K_rcv, Baseline Mode", "k_rcv_us", "baseline", "us"),
            ("K_rcv, Enhanced Mode", "k_rcv_us", "enhanced", "us"),
            ("K_rcv, %Lower", "k_rcv_pct_lower", "", "percent")]
    rows: list = []
    for r in blk[2:]:
        label = r[0].strip()
        m = re.match(r"(\d+) Threads,\s*(\d+)cps", label)
        th, c = int(m.group(1)), int(m.group(2))
        for (col, q, mode, unit), cell in zip(cols, r[1:]):
            role = "derived" if "pct" in q else "measured"
            emit(rows, tid, label, col, cell, q, role, unit, mode=mode, cores=cores, threads=th, cps=c,
                 pdr_threshold=pdr_threshold)
    return rows


def appendix_b(lines):
    start = next(i for i, ln in enumerate(lines) if ln.startswith("## Appendix B"))
    rows: list = []
    cps = None
    for ln in lines[start:]:
        m = re.match(r"- (\d+) cps", ln.strip())
        if m:
            cps = int(m.group(1))
            continue
        parts = ln.split("\t")
        if len(parts) == 3 and parts[0] == "Average:" and parts[1] != "CPU":
            emit(rows, "B", f"{cps} cps", f"CPU {parts[1]}", parts[2], "intr_per_s", "measured", "per_s",
                 cps=cps, cpu=parts[1])
    return rows


def transcribe(lines: list[str]) -> dict[str, list]:
    t: dict[str, list] = {}
    t["4.1"] = t41(lines, "4.1", "poisson")
    t["4.2"] = t41(lines, "4.2", "deterministic")
    t["4.3"] = t43(lines)
    t["4.4"] = model_rows(lines, "4.4", SPEC_44, arrivals="poisson", cores=1, threads=1)
    t["4.5"] = model_rows(lines, "4.5", SPEC_44, arrivals="deterministic", cores=1, threads=1)
    t["5.1"] = model_rows(lines, "5.1", SPEC_51, arrivals="poisson", cores=1, threads=1)
    for tid, c in (("5.2", 2), ("5.3", 4), ("5.4", 6), ("5.5", 8), ("5.6", 16)):
        t[tid] = model_rows(lines, tid, SPEC_52, arrivals="poisson", cores=1, threads=c)
    for tid, mode, thr in (("6.1", "baseline", 0.01), ("6.2", "enhanced", 0.01), ("6.4", "baseline", 0.02),
                           ("6.5", "enhanced", 0.02), ("6.7", "baseline", 0.05), ("6.8", "enhanced", 0.05)):
        t[tid] = measured_sps(lines, tid, mode, 1, thr)
    for tid, thr in (("6.3", 0.01), ("6.6", 0.02), ("6.9", 0.05)):
        t[tid] = comparison(lines, tid, 1, thr)
    for tid, mode, cores in (("7.1", "baseline", 2), ("7.2", "enhanced", 2), ("7.4", "baseline", 4),
                             ("7.5", "enhanced", 4), ("7.7", "baseline", 6), ("7.8", "enhanced", 6)):
        t[tid] = measured_sps(lines, tid, mode, cores, 0.01)
    for tid, cores in (("7.3", 2), ("7.6", 4), ("7.9", 6)):
        t[tid] = comparison(lines, tid, cores, 0.01)
    t["B"] = appendix_b(lines)
    return t


def main(seed: str, out: str) -> None:
    lines = Path(seed).read_text(encoding="utf-8").splitlines()
    outdir = Path(out)
    index = []
    tables = transcribe(lines)
    order = sorted(tables, key=lambda k: (k == "B", [int(x) for x in k.split(".")] if k != "B" else []))
    for tid in order:
        rows = tables[tid]
        name = f"table_{tid.replace('.', '_')}.csv" if tid != "B" else "appendix_b.csv"
        with open(outdir / name, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        caption, page = CAPTIONS[tid]
        index.append({"id": tid, "file": name, "caption": caption, "page": page,
                      "rows": len(rows), "quantities": sorted({r["quantity"] for r in rows})})
    (outdir / "tables.json").write_text(json.dumps({"source": "seed 000 (thesis), text extraction",
                                                    "columns": COLUMNS, "tables": index}, indent=1,
                                                   ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
