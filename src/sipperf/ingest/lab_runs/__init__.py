"""What ``sipperf lab`` records -> the tidy timeline.

* :mod:`.run` -- one run directory (capture + tracepoint log + proxy log) joined into the seven instants;
* :mod:`.tracelog` -- the bpftrace log of the kernel tracepoints;
* :mod:`.xlog` -- Kamailio's ``SIPPERF|`` xlog lines (the proxy's own instants);
* :mod:`.dataset` -- the stored recordings in ``datasets/lab`` (timelines, summaries of long runs).
"""
