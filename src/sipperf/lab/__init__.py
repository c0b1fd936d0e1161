"""The loopback SIP proxy lab: seed 000's three-host testbed and patched kernel, on one machine.

* :mod:`.kamailio` -- ``kamailio.cfg``: a transaction-stateful, record-routing Kamailio 5.6 proxy
  on udp 127.0.0.1:5060 with ``children`` = UDP workers, relaying to a SIPp UAS on :5080, and
  ``SIPPERF|in|c|out`` xlog lines with a fresh µs clock at script entry, after the common
  processing and in onsend_route (just before sendto);
* :mod:`.sipp` -- ``uac.xml`` / ``uac_poisson.xml`` / ``uas.xml``: INVITE, 180, 200, ACK, 250 ms
  hold, BYE, 200.  Deterministic arrivals with ``-r``; Poisson arrivals by a scenario whose
  calls all start at once and each pause for its planned arrival offset (cumsum of exponential
  gaps) read from an injection file -- SIPp 3.6 has no Poisson rate option;
* :mod:`.capture` -- dumpcap on ``lo``;
* :mod:`.tracer` -- ``sipperf.bt``: bpftrace on tracepoints only (net:netif_receive_skb,
  sock:sk_data_ready, syscalls recvfrom/sendto, sock:sock_recv_length, net:net_dev_xmit,
  skb:kfree_skb or udp:udp_fail_queue_rcv_skb, sock:sock_rcvqueue_full,
  sched:sched_wakeup/sched_switch), in ``map`` (records kept in BPF, written at the end),
  ``print`` or ``hist`` mode;
* :mod:`.meta` -- versions, CPU, scheduler knobs (EEVDF debugfs and /proc/sys/kernel/sched_*),
  clocks, load, UDP counters;
* :mod:`.run` -- :func:`~sipperf.lab.run.run_lab`: one bounded run, every process stopped by pid;
* :mod:`.chain` -- ``kamailio_chain.cfg``: two proxies in a chain (UAC -> edge -> core -> UAS),
  each element in a network namespace on one bridge, one capture on the bridge
  (:func:`~sipperf.lab.chain.run_chain`).

``sipperf lab run`` is the command; :func:`sipperf.ingest.lab_runs.run.read_run` the join.
"""
