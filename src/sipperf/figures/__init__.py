"""Figure and small computation helpers for the book's chapters 1–3 and 10.

One module per topic; every function is pure (returns data or draws on a given matplotlib
axis) so that chapters stay short:

* :mod:`.ladder` — the six-message call flow through the proxy and its sequence diagram (ch. 1)
* :mod:`.kernel_path` — the seven instants, the time components from the thesis tables,
  interrupts per packet (ch. 2)
* :mod:`.observer` — the observer effect of tracing on the M/G/1 wait (ch. 3)
* :mod:`.beyond_udp` — TCP connection memory and process models as queues (ch. 10)
"""
