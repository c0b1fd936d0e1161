"""Captures (pcap, pcapng, gzip'd) and their framings -> the tidy timeline.

=========================  =========================================================================
module                     what it does
=========================  =========================================================================
:mod:`.read`               a capture (or the files of a ring buffer) -> timeline, at any vantage point
:mod:`.pcap`               the packet table with the engine of your choice (bulk or pyshark)
:mod:`.fast`               the bulk reader: drives the compiled scanner, builds the packet table
:mod:`.scan`               the compiled single pass: records -> link -> IP -> UDP/TCP -> SIP fields
:mod:`.sipmsg`             the same SIP rules in plain Python (pyshark engine; the scanner's twin)
:mod:`.hep`                HEP v1/v2/v3 in plain Python (pyshark engine; tshark 4.0 has no HEP)
:mod:`.pyshark_engine`     the packet table through tshark/pyshark (the reference engine)
:mod:`.compact`            packet-table chunks as integer columns (the streaming analysis reads these)
:mod:`.chunks`             one capture file as a stream of compact chunks (in process, helper, Dask)
:mod:`.chunk_reader`       the helper process that runs :func:`.chunks.produce`
:mod:`.distributed`        the files of a ring buffer read on Dask workers
=========================  =========================================================================

Which message pairs with which (proxy, hops, B2BUA, endpoint) is :mod:`sipperf.ingest.pairing`.
"""
from sipperf.ingest.capture.read import capture_stem, read_capture, read_capture_set

__all__ = ["read_capture", "read_capture_set", "capture_stem"]
