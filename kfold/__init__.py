"""kfold: an event-sourced Kubernetes reconciler for sandbox sessions."""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("kfold")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
