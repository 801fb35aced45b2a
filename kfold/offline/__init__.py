"""Tools over a journal, offline: reading one (``sources``, ``progress``), refolding it
(``replay``, ``timeline``), what a walk says about a Session (``explain``), the machines'
diagrams (``diagrams``) and the read-only UI (``ui``).
Nothing here talks to a cluster."""
