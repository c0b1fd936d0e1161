"""Compiled single pass over a capture: records -> link -> IP -> UDP/TCP -> SIP fields (numba).

:func:`scan` walks the pcap/pcapng records of a byte buffer (the mapped file, or a
decompressed piece of a ``.gz``) and writes one output row per SIP message straight into
column arrays; :mod:`sipperf.ingest.capture.fast` drives it and turns the columns into the
packet table.  Everything a record goes through is here, in one compiled loop, with no Python
object per packet, one concern per file (in the order a packet meets them):

=====================  ==========================================================================
file                   what it does
=====================  ==========================================================================
:mod:`.records`        the record walk, :func:`scan` (the entry point) and :func:`pending_frames`:
                       pcap (µs/ns, either byte order, Kuznetzov's 24-byte record headers) and
                       pcapng (SHB per section and byte order, IDB with ``if_tsresol``/
                       ``if_tsoffset``, EPB, obsolete PB; an SPB has no timestamp and is a
                       counted skip)
:mod:`.packet`         one packet: link (Ethernet with 802.1Q/802.1ad/QinQ tags, LLC/SNAP, PPPoE,
                       MPLS; Linux cooked SLL/SLL2; BSD null/loopback; raw IP), IPv4 (options; a
                       total length of 0, as TSO captures have, means "to the end of the captured
                       bytes"; AH skipped) and IPv6 (extension headers), the tunnels (IP-in-IP,
                       GRE/ERSPAN, VXLAN, Geneve) and the dispatch to UDP (one SIP message per
                       datagram, bounded by the UDP length, and any further ones after its body; a HEP packet on any port; SigComp, DTLS and
                       UDP-encapsulated ESP named) or TCP; SCTP and ESP refused by name
:mod:`.ipfrag`         IPv4/IPv6 fragment reassembly (later data at the same offset replaces
                       earlier)
:mod:`.tcp`            a byte stream per flow, placed by sequence number whatever the order the
                       segments were captured in (the first captured copy of a byte wins; a
                       message's time is that of the segment completing it; a hole that is
                       never filled is a counted gap), then cut by the flow's framing: SIP
                       (Content-Length), HTTP Upgrade + WebSocket, HEPv3, or a named refusal
                       (TLS, WebSocket over TLS, SigComp)
:mod:`.reorder`        the out-of-order pool: bytes waiting for a hole to fill, bounded per
                       connection (64 KiB, 64 segments) and in all (1024 connections)
:mod:`.ws`             SIP over WebSocket (RFC 7118): the HTTP Upgrade, frames (masked or not,
                       fragmented, control frames), found by content when the upgrade is not
                       in the capture
:mod:`.hep`            HEPv1/v2/v3 (EEP) from capture agents: the SIP inside, with the agent's
                       addresses, ports and capture time
:mod:`.dedup`          a datagram seen twice (a SPAN port, two taps, HEP beside the packets):
                       same bytes and addresses within the duplicate window, no different IPv4
                       id; the first copy is kept, the others are counted skips
:mod:`.messages`       SIP messages cut from a span of bytes (Content-Length, start lines): TCP
                       streams, WebSocket messages, HEP payloads
:mod:`.tables`         address and TCP-flow interning (hash tables, rehash when grown)
:mod:`.sip`            one SIP message: start line, header block, unfolding, compact names, first
                       occurrence, malformed CSeq/status/Call-ID -- the rules of
                       :mod:`~sipperf.ingest.capture.sipmsg`, byte for byte
:mod:`.values`         the grammar of one header value (list element, parameter, name-addr,
                       unsigned integer)
:mod:`.rows`           the row writer: a message's columns from its header spans
:mod:`.primitives`     intrinsics and tiny byte readers (unaligned loads, memcpy, LF search,
                       integers in either byte order, whitespace, lower case)
:mod:`.layout`         the numbers everything is indexed by: output columns, counters and
                       :data:`REASONS`, scalar-state slots, limits, the header-name table
:mod:`.cache`          keeps numba's on-disk cache correct across these files (below)
=====================  ==========================================================================

Accounting: every packet record ends up in exactly one counter of ``cnt`` (parsed or a skip
reason, :data:`REASONS`); a packet that completes or contributes to a SIP message is parsed.
Strings are written as raw bytes; rows with a byte >= 0x80 are flagged so the caller can
decode them with U+FFFD replacement exactly as Python does.

State that lives across calls (pcapng interfaces, address interning, TCP flows and their
buffered bytes, pending IP fragments) is held in numpy arrays owned by the caller; arrays
that may grow inside a call are returned.

Speed: the small helpers (:mod:`.primitives`, :mod:`.values`) and the row writer are inlined
at Numba IR level (``inline="always"``, across files): a call with a dozen array arguments
costs more than the work of most of them.  The per-packet call chain
(:func:`.packet._packet`, :func:`.tcp._tcp`, :func:`.sip.parse_sip`) gets its arrays without
reference counting (:func:`.primitives._borrow`), and the plain-UDP path runs without Numba's
reference counting altogether: :func:`.packet._packet` and :func:`.sip.parse_sip` are compiled
with ``_nrt=False`` (their callees inherit it, so nothing under them allocates; a TCP segment
goes back to the record walk, which hands it to :func:`.packet._segment`), and the record walk
in :func:`.records.scan` grows its arrays in an outer loop, so that no array is reassigned in
the loop over records.  Each of the three had cost an eighth or more of the pass: a counted
array costs two calls (an atomic increment and decrement when it is not borrowed) wherever it
is passed, reassigned or dropped, and the per-packet functions have some thirty array arguments
and a return on every malformed case.  ``bench/ingest.py`` measures the reader,
``bench/scale.py`` the compiled pass alone.

Where new protocol support goes: another link type, tunnel or encapsulation carried in UDP
is a branch of the layer loop in :func:`.packet._packet` (as VXLAN, and HEP in :mod:`.hep`);
another framing of a TCP stream is a mode of :func:`.tcp._deliver` (as WebSocket in
:mod:`.ws`), chosen from the stream's first bytes by :func:`.tcp._detect`.

numba's cache (``cache=True``): numba judges a cached function fresh by the ONE file that
defines it, so an edit to a helper file would leave :func:`scan`'s old machine code in use.
:mod:`.cache` (imported first, below) gives every compiled function of this directory a
source stamp that is a fingerprint of ALL the directory's ``*.py`` files: after any edit here
the whole scanner is recompiled on its next call (about a minute of CPU).  Compiling
everything: one :func:`sipperf.ingest.capture.fast.read_packets` on any small capture (say
``tests/fixtures/udp4.pcapng``) compiles, or loads from the cache, all four entry points the
reader calls (:func:`scan`, :func:`pending_frames`, :func:`rehash_addr`, :func:`rehash_flows`;
every other compiled function is part of :func:`scan`'s code).
"""
from . import cache  # first: the cache locator must be in place before any @njit(cache=True)
from .layout import *  # noqa: F401,F403  (the constants: I_*, S_*, REASONS, ST_*, NAME_TAB, ...)
from .records import pending_frames, pending_out_of_order, scan
from .sip import header_end, parse_sip
from .tables import rehash_addr, rehash_flows
from .tcp import compact_arena
