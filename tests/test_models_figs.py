"""Capacity planning (:func:`sipperf.models.capacity.servers_needed`, ch. 8) against worked examples."""
from __future__ import annotations

import numpy as np

from sipperf.models.capacity import servers_needed


def test_servers_needed_by_hand():
    # 300 000 subscribers (seed 001 example): 1000 call msgs/s + 166.7 registration msgs/s
    assert servers_needed(3e5, 1, 2)[0] == 1
    # 20 M subscribers: 77 778 msgs/s = 12 963 call equivalents; 0.8 × 4000 per 2-core server -> 5
    assert servers_needed(2e7, 1, 2)[0] == 5
    assert np.isnan(servers_needed(1e6, 2, 1)[0])  # two processors need at least two cores
