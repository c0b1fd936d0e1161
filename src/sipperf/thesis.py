"""The thesis's numeric tables (seed 000) as tidy data frames.

Every table of chapters 4–7 and Appendix B is transcribed into ``datasets/thesis/`` as one
long CSV (one printed cell per row); ``datasets/thesis/README.md`` is the provenance and
``tables.json`` the index.  Columns shared by every file:

=================  =================================================================
``table``          table id as printed ("4.3", "B" for Appendix B)
``row``/``column`` the printed row and column labels (plain text)
``quantity``       machine name of the cell, unit in the suffix (``k_rcv_us``, ``lam_pps``)
``role``           measured | input | model | derived (derived = arithmetic of other cells)
key columns        ``msg_type arrivals mode cores threads cps pdr_threshold cpu`` (typed,
                   missing where the table has no such key)
``value``          the number (float, NaN for a printed "N/A")
``text``           the printed string, verbatim (keeps the printed precision)
``unit``           us, pps, count, 1 (dimensionless), percent, bytes, per_s
``bold``           the cell is bold in the thesis (the first load above a PDR threshold)
``note``           transcription doubt or erratum for that cell, if any
=================  =================================================================
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import pandas as pd

__all__ = ["datasets_dir", "list_tables", "load_table", "load_all", "table_meta", "wide",
           "decimals", "measured_drop_rates", "KEY_COLUMNS", "DROP_TABLES"]

KEY_COLUMNS = ["msg_type", "arrivals", "mode", "cores", "threads", "cps", "pdr_threshold", "cpu"]
#: the multi-thread tables of thesis ch. 5 (one core, Poisson calls; c = 1, 2, 4, 6, 8, 16 threads)
DROP_TABLES = ("5.1", "5.2", "5.3", "5.4", "5.5", "5.6")
_DTYPES = {"table": "string", "row": "string", "column": "string", "quantity": "string", "role": "string",
           "msg_type": "string", "arrivals": "string", "mode": "string", "cores": "Int64", "threads": "Int64",
           "cps": "Int64", "pdr_threshold": "float64", "cpu": "string", "value": "float64", "text": "string",
           "unit": "string", "bold": "bool", "note": "string"}


def datasets_dir() -> Path:
    """The repository's ``datasets/`` directory.

    ``$SIPPERF_DATASETS`` wins if set; otherwise walk up from this file until a directory
    holding ``datasets/thesis/tables.json`` is found.
    """
    env = os.environ.get("SIPPERF_DATASETS")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "datasets"
        if (cand / "thesis" / "tables.json").is_file():
            return cand
    raise FileNotFoundError("datasets/thesis not found above %s; set SIPPERF_DATASETS" % __file__)


@lru_cache(maxsize=4)
def _index(root: str) -> dict:
    return json.loads((Path(root) / "thesis" / "tables.json").read_text(encoding="utf-8"))


def _idx() -> dict:
    return _index(str(datasets_dir()))


def list_tables() -> list[str]:
    """Table ids in thesis order: ``["4.1", …, "7.9", "B"]``."""
    return [t["id"] for t in _idx()["tables"]]


def table_meta(table: str) -> dict:
    """Index entry of one table: file, caption, page, rows, quantities."""
    for t in _idx()["tables"]:
        if t["id"] == _norm(table):
            return dict(t)
    raise KeyError(f"no thesis table {table!r}; known: {', '.join(list_tables())}")


def _norm(table: str) -> str:
    t = str(table).strip()
    for prefix in ("Table ", "table_", "Appendix "):
        if t.startswith(prefix):
            t = t[len(prefix):]
    return t.replace("_", ".").upper() if t.upper() == "B" else t.replace("_", ".")


def load_table(table: str) -> pd.DataFrame:
    """One table as a tidy frame (one printed cell per row), typed as documented above."""
    meta = table_meta(table)
    path = datasets_dir() / "thesis" / meta["file"]
    return _read(str(path), path.stat().st_mtime_ns).copy()


@lru_cache(maxsize=64)
def _read(path: str, mtime_ns: int) -> pd.DataFrame:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col, dt in _DTYPES.items():
        s = df[col]
        if dt == "bool":
            df[col] = s == "1"
        elif dt in ("Int64", "float64"):
            df[col] = pd.to_numeric(s.replace("", None), errors="raise").astype(dt)
        else:
            df[col] = s.replace("", pd.NA).astype("string")
    return df


def load_all() -> pd.DataFrame:
    """All tables concatenated."""
    return pd.concat([load_table(t) for t in list_tables()], ignore_index=True)


def wide(table: str, index: list[str] | None = None) -> pd.DataFrame:
    """One table pivoted to one row per key combination and one column per quantity
    (``mode``-specific quantities of the comparison tables get a ``_baseline``/``_enhanced`` suffix)."""
    df = load_table(table)
    q = df["quantity"].astype(str)
    has_mode = df["mode"].notna() & df["table"].isin(["6.3", "6.6", "6.9", "7.3", "7.6", "7.9"])
    df = df.assign(quantity=q.where(~has_mode, q + "_" + df["mode"].astype(str)))
    if index is None:
        index = [k for k in KEY_COLUMNS if df[k].notna().any() and not (k == "mode" and has_mode.any())]
    out = df.set_index(index + ["quantity"])["value"].unstack("quantity")
    out.columns.name = None
    return out.reset_index()


def decimals(text: str) -> int:
    """Digits after the decimal point in a printed number ("0.0110" -> 4, "372" -> 0)."""
    t = str(text).replace("%", "").replace("*", "").replace(",", "").strip()
    return len(t.split(".", 1)[1]) if "." in t else 0


def measured_drop_rates() -> pd.DataFrame:
    """The measured packet drop rate of Tables 5.1–5.6 (thesis §5.3), RCVErrors / TotalMessages,
    recomputed from the printed counts (the printed ``drop_rate`` column is rounded).

    One row per printed call rate; columns ``table``, ``threads``, ``cps``, ``drop_rate``;
    sorted by thread count, then call rate."""
    frames = []
    for tid in DROP_TABLES:
        w = wide(tid).sort_values("cps")
        frames.append(pd.DataFrame({"table": tid, "threads": w["threads"].astype(int).to_numpy(),
                                    "cps": w["cps"].astype(int).to_numpy(),
                                    "drop_rate": (w["rcv_errors"] / w["total_messages"]).to_numpy(float)}))
    return pd.concat(frames, ignore_index=True).sort_values(["threads", "cps"], ignore_index=True)
