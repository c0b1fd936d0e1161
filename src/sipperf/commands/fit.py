"""``sipperf fit PATH...``: fit the book's constants to your own runs and print them as JSON.

Service demand per message type, alpha(lambda), beta(lambda, c) and C_{1,1}, each with its 95 %
interval (parametric bootstrap over the runs' batch means) and the runs it came from: the same
fit as ``sipperf report`` (its fit.json), without the HTML.  ``--out FILE`` writes the JSON to a
file; ``sipperf model mg1|mmck|capacity --fit FILE`` then uses the fitted values.  Inputs and
``--group-by`` as for ``sipperf report``.  Exit codes: 0 done, 2 unusable input.
"""
from __future__ import annotations

import argparse
import json
import sys


def _run(a: argparse.Namespace) -> int:
    from sipperf.report import fit_summary
    from sipperf.report.options import build_options, printable as _safe
    from sipperf.timeline import IngestError

    try:
        d = fit_summary(a.paths, **build_options(a))
        text = json.dumps(d, indent=2, default=str)
        if a.out:
            try:
                with open(a.out, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as e:
                raise IngestError(a.out, "--out", f"cannot write: {e.strerror or e}") from None
            print(_safe(f"wrote {a.out}"))
        else:
            print(text)
    except IngestError as e:
        print(_safe(f"sipperf fit: unusable input: {e}"), file=sys.stderr)
        return 2
    except ValueError as e:
        print(_safe(f"sipperf fit: error: {e}"), file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError:
        raise  # an optional package: sipperf.cli says which extra installs it
    except Exception as e:  # noqa: BLE001
        print(_safe(f"sipperf fit: internal error ({type(e).__name__}: {e}); please report it"), file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from sipperf.report.options import add_run_options

    p = sub.add_parser("fit", help="fit service demand, alpha, beta and C_{1,1} to your runs (JSON)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p)
    p.add_argument("--out", default=None, help="write the JSON to this file (default: print it)")
    p.set_defaults(func=_run)
