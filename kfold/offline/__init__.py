"""Tools over a journal, offline: reading one (``sources``, ``progress``), refolding it
(``replay``, ``timeline``), the machines' diagrams (``diagrams``) and the read-only UI (``ui``).
Nothing here talks to a cluster."""
