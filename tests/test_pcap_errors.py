"""Bad input: truncated captures and files that are not captures give a clear IngestError
naming the file and the position, or (on request) a counted skip; both engines agree."""
from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from sipperf.ingest import pcap_pyshark, pcapfast
from sipperf.ingest.pcap import read_pcap
from sipperf.timeline import IngestError

FIX = Path(__file__).parent / "fixtures"
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def tshark_count(path: Path) -> int:
    """Packets tshark can read before it gives up (its exit status is ignored)."""
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True).stdout
    return len(out.split())


@pytest.fixture
def truncated(tmp_path) -> Path:
    src = (FIX / "udp4.pcapng").read_bytes()
    out = tmp_path / "cut.pcapng"
    out.write_bytes(src[: len(src) * 2 // 3])  # cut inside a packet block
    return out


@pytest.fixture
def not_a_capture(tmp_path) -> Path:
    out = tmp_path / "kamailio.log"
    out.write_text("Nov 21 19:50:01 host kamailio[1]: INFO: <core> started\n" * 20)
    return out


@needs_tshark
def test_truncated_bulk_names_file_and_packet(truncated):
    good = tshark_count(truncated)
    with pytest.raises(IngestError) as e:
        pcapfast.read_packets(truncated)
    assert e.value.path == str(truncated)
    assert e.value.position.startswith(f"packet {good + 1} at byte ")
    assert str(truncated) in str(e.value) and "truncated" in str(e.value)


@needs_tshark
def test_truncated_pyshark_names_file_and_packet(truncated):
    good = tshark_count(truncated)
    with pytest.raises(IngestError) as e:
        pcap_pyshark.read_packets(truncated)
    assert e.value.path == str(truncated) and e.value.position == f"packet {good + 1}"
    assert "truncated" in str(e.value)


@needs_tshark
def test_truncated_skip_counts_and_keeps_the_good_part(truncated):
    full, _ = pcapfast.read_packets(FIX / "udp4.pcapng")
    a, ra = pcapfast.read_packets(truncated, on_truncated="skip")
    b, rb = pcap_pyshark.read_packets(truncated, on_truncated="skip")
    assert ra.skipped["truncated record"] == 1 and rb.skipped["truncated record"] == 1
    assert ra.balanced and rb.balanced
    good = tshark_count(truncated)
    assert a["frame"].max() <= good and len(a) == int((full["frame"] <= good).sum())
    assert a.equals(b)
    tl, rep = read_pcap(truncated, on_truncated="skip")
    assert rep.balanced and len(tl) > 0


@pytest.mark.parametrize("reader", [pcapfast.read_packets, pcap_pyshark.read_packets])
def test_not_a_capture(not_a_capture, reader):
    with pytest.raises(IngestError) as e:
        reader(not_a_capture)
    assert e.value.path == str(not_a_capture) and e.value.position == "byte 0"
    assert "not a pcap/pcapng" in str(e.value)


def test_empty_and_missing(tmp_path):
    (tmp_path / "empty.pcap").write_bytes(b"")
    with pytest.raises(IngestError, match="empty"):
        pcapfast.read_packets(tmp_path / "empty.pcap")
    with pytest.raises(IngestError):
        read_pcap(tmp_path / "missing.pcapng")


@needs_tshark
def test_pyshark_inside_running_event_loop():
    """What a Jupyter cell does: call the plain function while an asyncio loop runs."""
    async def cell():
        return pcap_pyshark.read_packets(FIX / "udp6.pcapng")

    df, rep = asyncio.run(cell())
    ref, _ = pcapfast.read_packets(FIX / "udp6.pcapng")
    assert rep.balanced and df.equals(ref)
