"""Writing an analysis: the output directory, its CSV files and ``report.json``.

:func:`prepare_out_dir` is the check of ``sipperf analyze --out`` and ``sipperf report --out``
(before any work is done); :func:`write_analysis` writes what :meth:`Analysis.write
<sipperf.analysis.result.Analysis.write>` promises.  Every failure is an
:class:`~sipperf.timeline.IngestError` naming the file.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["prepare_out_dir", "write_file", "write_analysis", "finite"]


def prepare_out_dir(out_dir) -> Path:
    """Create the output directory and prove it is writable, before any work is done."""
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise IngestError(display_path(out), "--out", "exists and is not a directory: give a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".sipperf-write-test-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise IngestError(display_path(out), "--out", f"cannot write there: {e.strerror or e}") from None
    return out


def write_file(path: Path, writer: Callable[[Path], Any]) -> Path:
    """``writer(path)``; an OSError becomes an IngestError naming the file."""
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    try:
        writer(path)
    except OSError as e:
        raise IngestError(display_path(path), "--out", f"cannot write: {e.strerror or e}") from None
    return path


def finite(x):
    """JSON has no NaN/inf: null instead."""
    if isinstance(x, dict):
        return {str(k): finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return None
    if isinstance(x, np.generic):
        return finite(x.item())
    return x


def write_analysis(a, out_dir) -> list[Path]:
    """components.csv (components_by_hop.csv with several hops), calls.csv, transactions.csv,
    counts.csv and report.json of the analysis ``a`` into ``out_dir`` (created); their paths."""
    out = prepare_out_dir(out_dir)
    files = [write_file(out / "components.csv", lambda p: a.components.to_csv(p, index=False))]
    if a.components_by_hop is not None:
        files.append(write_file(out / "components_by_hop.csv", lambda p: a.components_by_hop.to_csv(p, index=False)))
    files.append(write_file(out / "calls.csv", lambda p: a.calls.to_csv(p, index=False)))
    files.append(write_file(out / "transactions.csv", lambda p: a.transactions.to_csv(p, index=False)))
    files.append(write_file(out / "counts.csv", lambda p: a.counts.to_csv(p, index=False)))
    rep_d = {**a.report.to_dict(), "summary": a.summary}
    files.append(write_file(out / "report.json",
                            lambda p: p.write_text(json.dumps(finite(rep_d), indent=2, default=str))))
    return files
