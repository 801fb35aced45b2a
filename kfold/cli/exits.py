"""The exit code of an error a command reports in one line (the table in ``kfold --help``).

- 2: input kfold cannot use: a journal it cannot read, a kubeconfig, context, exec plugin or
  name it refuses, a file it cannot open. The same input gives 2 from every command.
- 3: a journal's broken checksum chain.
- 1: the command ran and the other side said no or found nothing: an apiserver that did not
  answer (or refused), a cluster that is not registered, a registry that does not parse.
"""
from __future__ import annotations


def exit_code(exc: BaseException) -> int:
    from kfold.offline.sources import input_error_code
    from kfold.registry import RegistryError
    from kfold.registry.errors import CredentialMissing, NotRegistered, RegistryCorrupt, Unreachable
    if isinstance(exc, (Unreachable, NotRegistered, CredentialMissing, RegistryCorrupt, Unanswered)):
        return 1
    code = input_error_code(exc)
    if code is None and isinstance(exc, RegistryError):
        code = 2
    return 1 if code is None else code


class Unanswered(Exception):
    """The apiserver gave no answer (refused, reset, DNS, TLS, timeout)."""
