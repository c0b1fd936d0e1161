"""sipperf: measure, model and simulate the performance of a SIP proxy server.

One pipeline (see ``book/appendix/design.md``)::

    ingest (lab, thesis logs, pcaps, SimPy) -> timeline -> components -> models / stats -> book

Data flows one way: modules import only from modules to their left.
"""
__version__ = "0.1.0"
