"""``kfold run``: the daemon process. ``boot`` wires it from the config (``config``): the journal
(``journal``), the clusters it reconciles (``clusters``, followed by ``follow``), leader election
and shards (``leader``, ``shards``), the HTTP endpoints (``http``) and logs (``logs``); ``loop``
is the committer that journals, folds and issues. ``manifests`` is its in-cluster install."""
