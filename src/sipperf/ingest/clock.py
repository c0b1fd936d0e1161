"""Timestamps that cannot be right: found per capture interface, named, and repaired by a stated rule.

A capture's clock can lie in three ways that matter to a sojourn measured as the difference of
two stamps:

* **a stray stamp**: one packet, or a few, stamped zero (1970), before 1990, after the file was
  written, or far out of place among the packets around it (a corrupt record, a buggy
  appliance): a pair with such a copy would measure decades.  *Rule*: the stamp is replaced by
  the stamp of the packet before it on the same interface (the one after it for the first
  packets), so the message keeps its place and pairs with its other copy (no drop is invented);
  its time in the proxy is then left out (:func:`unknown_sojourn`).  Each is counted by reason.
* **the clock stepping back** (an NTP step, a VM migration): the stamps after the step repeat a
  stretch of time the interface already showed, so a message whose ingress copy was stamped
  before the step and whose egress copy after it would leave before it arrived.  *Rule*: a step
  back of :data:`CLOCK_STEP_MIN_NS` or more (ntpd steps the clock from 128 ms, chrony's
  ``makestep`` from 0.1-1 s) whose later stamps fall inside the time already covered and go on
  steadily from the new level, still inside that time (the next :data:`LOOKAHEAD` rows), is undone: the stamps after it
  are shifted by the step, as if no time had passed across it; the messages in the proxy at
  that moment have their time left out (the gap across the step is unknown).  Counted, with the largest step and the packet it
  came at.  Shorter steps back (a capture's queues, TCP messages completed out of order) are
  counted and left as stamped; an egress copy that ends up stamped before its ingress copy is
  then paired by :func:`sipperf.ingest.pairing.proxy._pair_inverted`.
* **records out of time order** (``mergecap -a`` of an earlier file after a later one, records
  written out of order): a step back of a second or more to before everything the interface
  showed so far is the file's order, not the clock's, and is only named (a shorter one, near the
  start, is named and left as stamped); more than :data:`MAX_CLOCK_STEPS` steps
  back on one interface mean the records are not in time order at all: nothing is shifted,
  the pairing sorts by time (and the count is named).  Steps back are counted beyond
:data:`JITTER_FLOOR_NS`.

:class:`ClockCheck` is fed the packet table's rows in file order, in one piece (in memory) or
chunk by chunk (the streaming engine, one chunk behind so that the next chunk's first rows are
its lookahead; the state carries across chunks), with the same steps either way; a stray is
judged among the rows of the piece it is in.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

import numpy as np

#: stamps before this are not a capture's (SIP itself is from 1999)
EPOCH_MIN_NS = int(_dt.datetime(1990, 1, 1, tzinfo=_dt.timezone.utc).timestamp()) * 10**9
#: a stamp later than the file's modification time plus this was not taken when it was written
AFTER_FILE_NS = 86_400 * 10**9
#: steps back up to this are jitter whatever the interface shows (several capture queues)
JITTER_FLOOR_NS = 1_000_000
#: an out-of-place stamp is this far (at least) from both packets beside it
STRAY_GAP_MIN_NS = 10 * 10**9
#: a step back to before every earlier stamp by at least this is an earlier recording (a merge)
MERGE_STEP_NS = 10**9
#: the smallest step back undone as a clock step (ntpd steps from 128 ms, chrony's makestep
#: from 0.1-1 s; smaller ones are a capture's reordering, left as stamped)
CLOCK_STEP_MIN_NS = 100_000_000
#: a step is undone only when the stamps go on steadily from the new level for this many rows
LOOKAHEAD = 4
#: the longest run of strays told from the stamps around them (a window of 2 * STRAY_RUN + 1)
STRAY_RUN = 4
#: more steps back than this on one interface: the records are not in time order
MAX_CLOCK_STEPS = 3

REASONS = {
    "early": "stamp of zero or before 1990",
    "future": "stamp after the file was written",
    "out_of_place": "stamp far out of place among the packets around it",
}


@dataclass
class _Iface:
    last: int | None = None        # the last (corrected) stamp
    lo: int | None = None          # the earliest (corrected) stamp so far
    offset: int = 0                # what the steps undone so far add to a stamp
    in_order: bool = True          # False: too many steps back, nothing is shifted any more
    strays: dict = field(default_factory=lambda: {k: 0 for k in REASONS})
    steps: list = field(default_factory=list)       # (frame, size_ns) undone
    reorders: list = field(default_factory=list)    # (frame, size_ns): back before everything seen
    small: list = field(default_factory=list)       # (frame, size_ns): the same, by less than a second
    back_steps: int = 0            # steps back larger than the jitter floor, all kinds
    raw_last: int | None = None    # the last stamp as read (after a stray's repair)
    raw_tail: list = field(default_factory=list)  # the last STRAY_RUN stamps as read (after repair)


def unknown_sojourn(flags_in: np.ndarray, flags_out: np.ndarray) -> np.ndarray:
    """Pairs (ingress, egress copy flags, :attr:`ClockCheck.flags`) whose time in the proxy is not
    known: a copy's stamp was repaired, or a clock step undone lies between the two copies."""
    flags_in, flags_out = np.asarray(flags_in, np.int64), np.asarray(flags_out, np.int64)
    return ((flags_in | flags_out) & 1).astype(bool) | ((flags_in >> 1) != (flags_out >> 1))


class ClockCheck:
    """Finds and repairs implausible stamps of one capture file (see the module doc).

    ``not_after_ns``: the file's modification time (ns); stamps later than it by more than
    :data:`AFTER_FILE_NS` are strays.  :meth:`apply` takes the rows of the packet table in file
    order and returns the corrected stamps, and sets ``flags`` for those rows: bit 0 set where the
    stamp was repaired, the rest the number of clock steps undone before the row on its interface
    (two copies with different numbers have a step between them, :func:`unknown_sojourn`);
    :meth:`findings` and :meth:`notes` say what was done."""

    def __init__(self, not_after_ns: int | None = None):
        self.not_after = None if not_after_ns is None else int(not_after_ns) + AFTER_FILE_NS
        self.ifs: dict[int, _Iface] = {}
        self.rows = 0

    # ------------------------------------------------------------------ one piece
    def apply(self, ts: np.ndarray, iface: np.ndarray, frame: np.ndarray,
              ahead: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """The corrected stamps of the next rows (in file order).  ``ahead``: (stamps, interfaces)
        of the rows that follow, if any (the next chunk's first :data:`LOOKAHEAD` rows are
        enough): a stamp is judged with the ones after it."""
        ts = np.asarray(ts, np.int64)
        out = ts.copy()
        self.flags = np.zeros(len(ts), np.int64)
        if not len(ts):
            return out
        iface = np.asarray(iface, np.int64)
        frame = np.asarray(frame, np.int64)
        self.rows += len(ts)
        for k in np.unique(iface).tolist():
            sel = np.flatnonzero(iface == k)
            nxt = (np.asarray(ahead[0], np.int64)[np.asarray(ahead[1]) == k][:LOOKAHEAD] if ahead is not None
                   else np.zeros(0, np.int64))
            st = self.ifs.setdefault(int(k), _Iface())
            out[sel], self.flags[sel] = self._one(ts[sel], frame[sel], nxt, st)
        return out

    def _one(self, t: np.ndarray, fr: np.ndarray, nxt: np.ndarray, st: _Iface) -> np.ndarray:
        n = len(t)
        why = self._strays(np.concatenate([t, nxt]), st)[:n]
        bad = why > 0
        for code, r in enumerate(REASONS, 1):
            st.strays[r] += int((why == code).sum())
        raw_prev = st.last - st.offset if st.last is not None else None
        if bad.any():
            t = _fill(t, bad, raw_prev)
        st.raw_last = int(t[-1])
        st.raw_tail = (st.raw_tail + t[-STRAY_RUN:].tolist())[-STRAY_RUN:]
        e0 = len(st.steps)
        t, stepped, excursion = self._steps(t, fr, nxt, st)
        epoch = e0 + np.cumsum(stepped)
        return t, (epoch << 1) | (bad | excursion).astype(np.int64)

    def _strays(self, t: np.ndarray, st: _Iface) -> np.ndarray:
        """Why each of ``t`` (this piece's stamps, then the ones after it) is a stray: 0 it is not,
        else the 1-based index of its reason in :data:`REASONS`."""
        early = t < EPOCH_MIN_NS
        future = (t > self.not_after) if self.not_after is not None else np.zeros(len(t), bool)
        bad = early | future
        why = np.where(early, 1, np.where(future, 2, 0))
        if bad.all() and st.last is None:
            return np.zeros(len(t), np.int64)  # no stamp at all: the capture has no timing (said elsewhere)
        good = np.flatnonzero(~bad)
        if len(good) >= 2:
            g = t[good]
            srt = np.sort(g)
            gaps = np.diff(srt)
            pos = gaps[gaps > 0]
            gap = max(STRAY_GAP_MIN_NS, 100 * int(np.median(pos))) if len(pos) else STRAY_GAP_MIN_NS
            # out of place: far from the median of the stamps around it (a run of up to
            # STRAY_RUN strays leaves that median where the good ones are)
            k = STRAY_RUN
            tail = np.asarray(st.raw_tail[-k:], np.int64)
            first = tail[0] if len(tail) else g[0]
            ctx = np.concatenate([np.full(k - len(tail), first, np.int64), tail, g, np.full(k, g[-1], np.int64)])
            med = np.median(np.lib.stride_tricks.sliding_window_view(ctx, 2 * k + 1), axis=1)[:len(g)]
            spike = np.flatnonzero(np.abs(g - med) > gap)
            if len(spike):
                # and alone: few other stamps within that gap of it
                near = (np.searchsorted(srt, g[spike] + gap, side="right")
                        - np.searchsorted(srt, g[spike] - gap, side="left"))
                few = max(10, len(g) // 100)
                why[good[spike[near < few]]] = 3
        return why

    def _steps(self, t: np.ndarray, fr: np.ndarray, nxt: np.ndarray, st: _Iface) -> np.ndarray:
        t = t + st.offset
        prev = np.concatenate([[st.last], t[:-1]]) if st.last is not None else np.concatenate([[t[0]], t[:-1]])
        back = prev - t
        big = np.flatnonzero(back > JITTER_FLOOR_NS)
        stepped = np.zeros(len(t), np.int64)
        excursion = np.zeros(len(t), bool)
        if len(big):
            shift = np.zeros(len(t), np.int64)
            after = np.concatenate([t, nxt + st.offset])
            lo = st.lo if st.lo is not None else int(t[0])
            for i in big.tolist():
                d = int(back[i])
                if d >= CLOCK_STEP_MIN_NS and st.in_order:
                    # the way back from a short excursion (up to STRAY_RUN packets stamped ahead of
                    # the line the others keep, which runs steadily before and after): not a step,
                    # those packets are strays
                    j, lo_j = i, max(0, i - STRAY_RUN)
                    while j > lo_j and t[j - 1] > t[i] + JITTER_FLOOR_NS:
                        j -= 1
                    base = int(t[j - 1]) if j > 0 else st.last
                    before = t[max(0, j - LOOKAHEAD):j]
                    run = after[i:i + LOOKAHEAD + 1]
                    line = (len(before) < 2 or bool((np.diff(before) >= -JITTER_FLOOR_NS).all())) and \
                        len(run) > 1 and bool((np.diff(run) >= -JITTER_FLOOR_NS).all())
                    if j < i and base is not None and base <= t[i] + JITTER_FLOOR_NS and (j > 0 or i <= STRAY_RUN) \
                            and line:
                        t[j:i] = base
                        excursion[j:i] = True
                        st.strays["out_of_place"] += i - j
                        continue
                st.back_steps += 1
                if st.in_order and st.back_steps > MAX_CLOCK_STEPS:
                    st.in_order = False
                if not st.in_order:
                    continue
                seen_lo = min(lo, int(t[:i].min())) if i else lo
                run = after[i:i + LOOKAHEAD + 1]
                # a step: the stamps go on steadily from the new level AND stay inside the time
                # already shown (below the stamp before the step).  Rows stamped on time but written
                # late (a capture queue or a CPU's backlog stalled, the rows after them back on the
                # line at once) are not a step: left as stamped
                steady = len(run) > 1 and bool((np.diff(run) >= -JITTER_FLOOR_NS).all()) \
                    and bool((run < int(prev[i]) - JITTER_FLOOR_NS).all())
                if d >= CLOCK_STEP_MIN_NS and int(t[i]) >= seen_lo and steady:
                    shift[i] += d          # the time already covered, again, and on from there: a step
                    stepped[i] = 1
                    st.steps.append((int(fr[i]), d))
                elif d >= MERGE_STEP_NS and int(t[i]) < seen_lo:
                    st.reorders.append((int(fr[i]), d))   # back before everything: the file's order
                else:
                    st.small.append((int(fr[i]), d))      # left as stamped
            add = np.cumsum(shift)
            t = t + add
            st.offset += int(add[-1])
        st.last = int(t[-1])
        tmin = int(t.min())
        st.lo = tmin if st.lo is None else min(st.lo, tmin)
        return t, stepped, excursion

    # ------------------------------------------------------------------ what was found
    def findings(self) -> dict:
        """Per interface: strays by reason, steps undone, steps that are the file's order."""
        out = {}
        for k, st in sorted(self.ifs.items()):
            d = {}
            if any(st.strays.values()):
                d["stray_stamps"] = {REASONS[r]: n for r, n in st.strays.items() if n}
            if st.steps:
                d["clock_steps_back"] = {"count": len(st.steps), "largest_ms": max(s for _, s in st.steps) / 1e6,
                                         "first_at_packet": st.steps[0][0]}
            if not st.in_order:
                d["not_in_time_order"] = {"steps_back": st.back_steps, "jitter_ms": JITTER_FLOOR_NS / 1e6}
            elif st.reorders:
                d["file_order_steps_back"] = {"count": len(st.reorders),
                                              "largest_ms": max(s for _, s in st.reorders) / 1e6,
                                              "first_at_packet": st.reorders[0][0]}
            if st.small:
                d["steps_back_left"] = {"count": len(st.small), "largest_ms": max(x for _, x in st.small) / 1e6,
                                        "first_at_packet": st.small[0][0]}
            if d:
                out[str(k)] = d
        return out

    def changed(self) -> bool:
        """Whether any stamp was replaced or shifted."""
        return any(any(st.strays.values()) or st.steps for st in self.ifs.values())

    def notes(self, path) -> list[str]:
        out = []
        for k, d in self.findings().items():
            where = f"{path}: interface {k}"
            if "stray_stamps" in d:
                what = ", ".join(f"{n} {r}" for r, n in d["stray_stamps"].items())
                out.append(f"{where}: {sum(d['stray_stamps'].values())} SIP messages had an impossible "
                           f"timestamp ({what}): each takes the stamp of the packet before it on the "
                           "interface, so it pairs as captured; its time in the proxy is left out")
            if "clock_steps_back" in d:
                s = d["clock_steps_back"]
                out.append(f"{where}: the clock stepped back {s['count']} time(s), by up to "
                           f"{s['largest_ms']:.3f} ms (first at packet {s['first_at_packet']}; the stamps go on "
                           "steadily from the new level, inside time the interface had already shown): the stamps after each "
                           "step are shifted forward by it, so no message leaves before it arrived; the "
                           "time of the messages inside the proxy at the step is left out")
            if "file_order_steps_back" in d:
                s = d["file_order_steps_back"]
                out.append(f"{where}: {s['count']} step(s) back to before every earlier packet (up to "
                           f"{s['largest_ms']:.3f} ms, first at packet {s['first_at_packet']}): records of an "
                           "earlier time written after later ones (a merge); read in time order, nothing shifted")
            if "steps_back_left" in d:
                s = d["steps_back_left"]
                out.append(f"{where}: {s['count']} step(s) back by up to {s['largest_ms']:.3f} ms to before every "
                           f"earlier packet (first at packet {s['first_at_packet']}): left as stamped")
            if "not_in_time_order" in d:
                out.append(f"{where}: the records are not in time order ({d['not_in_time_order']['steps_back']} "
                           f"steps back beyond the {d['not_in_time_order']['jitter_ms']:.3f} ms jitter): read in "
                           "time order, nothing shifted")
        return out


    def account(self, path, report) -> None:
        """The findings into ``report``: its notes and ``details["clock"]["checks"]``."""
        f = self.findings()
        if f:
            report.details.setdefault("clock", {})["checks"] = f
            report.notes.extend(self.notes(path))


def file_time_ns(path) -> int | None:
    """The file's modification time in ns (None if it cannot be read)."""
    import os
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _fill(t: np.ndarray, bad: np.ndarray, before: int | None) -> np.ndarray:
    """``t`` with the ``bad`` stamps replaced by the last good one before them (``before`` for
    the first ones: the piece before's), or the first good one after them."""
    t = t.copy()
    idx = np.where(~bad, np.arange(len(t)), -1)
    last = np.maximum.accumulate(idx)
    have = last >= 0
    t[bad & have] = t[last[bad & have]]
    rest = bad & ~have
    if rest.any():
        if before is not None:
            t[rest] = before
        elif (~bad).any():
            t[rest] = t[np.flatnonzero(~bad)[0]]
    return t
