"""Which packet is which message at which node: the vantage point and the pairing rules.

Shared by every reader that sees messages on the wire (captures, thesis logs with several hops):

* :mod:`.vantage` -- find the nodes in a capture and decide what it is (proxy, hops, B2BUA, endpoint);
* :mod:`.hop` -- one proxy's ingress/egress pairing and the drop rule (compiled, vectorised);
* :mod:`.proxy` -- packets at a proxy (or several hops) -> the timeline;
* :mod:`.b2bua` -- a back-to-back user agent's two legs correlated across Call-IDs;
* :mod:`.endpoint` -- a capture at a user agent: request -> response per transaction.
"""
