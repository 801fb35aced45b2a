"""``kfold ui``: the journal index (``index``), the read-only HTTP server (``server``) and the static page (``static/``)."""
