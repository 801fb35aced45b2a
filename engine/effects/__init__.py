"""Effects: what the fold asks the outside world to do (``models``, pure data), and the executor
and observer that do it through the Kubernetes client (the only modules that talk to an apiserver).

Importing this package imports nothing that does I/O; import ``engine.effects.executor`` or
``engine.effects.observer`` explicitly where I/O is wanted.
"""
