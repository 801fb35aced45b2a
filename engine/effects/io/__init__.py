"""The I/O side of effects, the only modules that talk to an apiserver: the executor
(``executor``, ``ops`` per effect, ``resources`` paths, ``transport`` over the Kubernetes client,
``kube_errors``), the observers (``observer`` over a ``watch`` stream), the server clocks
(``clock``) and an in-memory fake apiserver (``fake``) for tests and the simulator.

It may import the pure layer (``engine``, ``engine.effects``) and ``journal``; they never import it.
"""
