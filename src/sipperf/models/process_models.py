"""Process models of a SIP proxy (seed ``process_models``, Lundström): the measurements the book uses.

Transcribed from the report (cited in the book; never read from the seeds at run time):

* Table 6.1: CPU time per half call (five SIP messages: INVITE, 200, ACK, BYE, 200) on one TSP
  traffic processor: asynchronous (event driven, one process) 0.10 ms, pooling (100
  pre-created processes) 0.11 ms, dynamic (a new process per message) 0.39 ms.
* Appendix E: latency of each SIP message through the prototype (from receipt to send, Ethereal
  time stamps, ms), about 10 000 calls per half-call rate.  Transcribed: the "SUMMARY" tables
  (all messages: E.6 asynchronous, E.12 dynamic, E.18 pooling) mean and median, and the INVITE
  tables (E.1, E.7, E.13) mean and median, at 100–700 and 900 half calls/s.  Lundström
  attributes the high BYE latencies to SIPp sending BYE requests in bursts (§7.3).
"""
from __future__ import annotations

__all__ = ["PROCESS_MODEL_CPU_MS", "MESSAGES_PER_HALF_CALL", "LATENCY_RATES", "LATENCY_MS"]

#: CPU time per half call (ms) of each prototype, Table 6.1
PROCESS_MODEL_CPU_MS: dict[str, float] = {"asynchronous": 0.10, "pooling": 0.11, "dynamic": 0.39}
#: SIP messages in a half call
MESSAGES_PER_HALF_CALL = 5

#: half-call rates (per s) of Appendix E
LATENCY_RATES = (100, 200, 300, 400, 500, 600, 700, 900)
#: Appendix E latencies (ms per message): prototype -> statistic -> one value per LATENCY_RATES
LATENCY_MS: dict[str, dict[str, tuple[float, ...]]] = {
    "asynchronous": {  # Tables E.6 (summary) and E.1 (INVITE)
        "mean": (0.80, 0.87, 0.92, 0.97, 0.98, 0.99, 1.00, 1.00),
        "median": (0.80, 0.89, 0.91, 0.93, 0.91, 0.91, 0.90, 0.88),
        "invite_mean": (0.95, 0.96, 0.96, 0.96, 0.96, 0.97, 0.97, 0.99),
        "invite_median": (0.96, 0.96, 0.96, 0.96, 0.96, 0.97, 0.97, 0.97),
    },
    "pooling": {  # Tables E.18 and E.13
        "mean": (0.92, 1.39, 1.86, 2.17, 2.28, 2.37, 2.47, 2.65),
        "median": (0.93, 1.43, 1.84, 2.19, 2.34, 2.50, 2.58, 2.73),
        "invite_mean": (0.97, 0.99, 1.05, 1.03, 1.00, 1.01, 1.01, 1.05),
        "invite_median": (0.97, 0.97, 0.97, 0.97, 0.97, 0.97, 0.97, 0.98),
    },
    "dynamic": {  # Tables E.12 and E.7
        "mean": (1.01, 1.61, 2.31, 3.06, 4.26, 5.25, 6.25, 7.76),
        "median": (1.01, 1.62, 2.26, 3.07, 4.27, 5.18, 6.09, 7.32),
        "invite_mean": (0.83, 0.87, 0.97, 1.08, 1.42, 1.73, 2.25, 3.51),
        "invite_median": (0.82, 0.82, 0.82, 0.84, 0.84, 0.86, 0.89, 1.10),
    },
}
