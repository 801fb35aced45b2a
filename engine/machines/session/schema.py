"""The Session's rules, declared once: the CRD's ``openAPIV3Schema`` for ``metadata.name`` and
``spec`` (types, bounds, patterns, CEL rules, descriptions) is generated from ``NAME`` and ``SPEC``
(kfold/daemon/session_crd.py), and kfold's validator (``session.spec.validate``) checks the same
declaration with ``check_name``/``check_spec`` before it applies what only kfold can judge.

Guarantees:
- ``check_spec(raw)`` / ``check_name(name)``: the first ``engine.openapi.Problem`` the apiserver's
  admission reports for the same input, with its field path, or None.
- Every CEL message names the offending value, as the Python twin beside it does.
- What is *not* declared here is kfold's, because it depends on kfold's config or parsers
  (docs/session-api.md "What kfold checks"): the default image (``spec.image`` may be left out),
  the registered cluster names (``spec.cluster``), the clone url's form (``spec.repositories[].url``,
  parsed by ``engine.repo_names`` as the Repo resource is) and the configured ceilings (a clamp,
  never a refusal).

Caveats:
- The duplicate-port rule is admission's only (``cel_only``): a Session stored before the rule
  (kept by the apiserver's validation ratcheting while its apps are unchanged) still reaches kfold,
  which routes each port to the first app declaring it and reports the rest (``PortConflict``).

Pure: no I/O.
"""
from __future__ import annotations

import json
from typing import Any

from engine.openapi import CelRule, Node, Problem, check
from engine.quantity import RESOURCE_NAME, quantity

MAX_SESSION_NAME = 50      # room for ``-g<N>`` and Service/Ingress/Secret suffixes
MAX_APP_NAME = 59          # container ``app-<name>`` must fit a 63-character DNS label
IO_MODES = ("tty", "pipe", "streams", "none")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")   # core/v1 Container.imagePullPolicy
PROTOCOLS = ("TCP", "UDP")
LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
QUANTITY_EXAMPLES = "e.g. '500m', '2' or '1Gi'"


def _name_says(name: str) -> str:
    return f"at most {MAX_SESSION_NAME} characters, not {len(name)} (kfold names the pods <session>-g<N>)"


NAME = Node(
    "string", "The Session's name: at most 50 characters (kfold names its pods <session>-g<N>).",
    max_length=253,
    rules=(CelRule(f"size(self) <= {MAX_SESSION_NAME}",
                f"'at most {MAX_SESSION_NAME} characters, not %d (kfold names the pods <session>-g<N>)'.format([size(self)])",
                lambda v: len(v) <= MAX_SESSION_NAME, _name_says, reason="FieldValueInvalid"),))


# -- apps and their ports -----------------------------------------------------------------------

def _dup_app(apps: list[dict[str, Any]]) -> str:
    names = [a["name"] for a in apps]
    return next(n for n in names if names.count(n) > 1)


_UNIQUE_APPS = CelRule(
    "self.all(a, self.exists_one(b, b.name == a.name))",
    "\"app name '%s' is declared more than once; each app needs a name of its own\""
    ".format([self.filter(a, !self.exists_one(b, b.name == a.name))[0].name])",
    lambda apps: len({a["name"] for a in apps}) == len(apps),
    lambda apps: f"app name {_dup_app(apps)!r} is declared more than once; each app needs a name of its own",
    reason="FieldValueInvalid")


def _ports(apps: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(a["name"], p["port"], p.get("protocol", "TCP")) for a in apps for p in a.get("ports") or ()]


def _keys(ports: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(p["port"], p.get("protocol", "TCP")) for p in ports]


def _twice(ports: list[dict[str, Any]]) -> str:
    port, proto = next(k for k in _keys(ports) if _keys(ports).count(k) > 1)
    return f"{proto} port {port} is declared more than once in this app; each port and protocol is routed once"


def _shared(apps: list[dict[str, Any]]) -> str:
    keys = [(port, proto) for _, port, proto in _ports(apps)]
    who = [a["name"] for a in apps if any(keys.count(k) > 1 for k in _keys(a.get("ports") or []))]
    return (f"apps {json.dumps(who)} declare the same port and protocol; each port and protocol is routed to "
            "one app only")


_SAME = "q.port == p.port && q.protocol == p.protocol"
_COUNT = f"self.map(b, has(b.ports) ? b.ports.filter(q, {_SAME}).size() : 0).sum()"
# Within one app (the apiserver names the app's ports list and the port) ...
_PORT_ONCE = CelRule(
    f"self.all(p, self.exists_one(q, {_SAME}))",
    "\"%s port %d is declared more than once in this app; each port and protocol is routed once\""
    f".format([self.filter(p, !self.exists_one(q, {_SAME}))[0].protocol, "
    f"self.filter(p, !self.exists_one(q, {_SAME}))[0].port])",
    lambda ports: len(set(_keys(ports))) == len(ports), _twice, reason="FieldValueInvalid", cel_only=True)
# ... and across apps (the apiserver names the apps; a CEL message naming the port too is over its cost budget).
_UNIQUE_PORTS = CelRule(
    f"self.all(a, !has(a.ports) || a.ports.all(p, {_COUNT} == 1))",
    "\"apps %s declare the same port and protocol; each port and protocol is routed to one app only\".format(["
    f"self.filter(a, has(a.ports) && a.ports.exists(p, {_COUNT} > 1)).map(a, a.name)])",
    lambda apps: len(set((p, q) for _, p, q in _ports(apps))) == len(_ports(apps)),
    _shared, reason="FieldValueInvalid", cel_only=True)

PORT = Node(
    "object", "A port the app serves.", required=("port",), properties={
        "port": Node("integer", "The container port, 1-65535.", minimum=1, maximum=65535, what="a port number"),
        "protocol": Node("string", "TCP or UDP.", enum=PROTOCOLS, default="TCP", max_length=3),
    })

APP = Node(
    "object", "An app: container app-<name> beside the workspace container.", required=("name",), properties={
        "name": Node("string", "The app's name: container app-<name>; a DNS label (lower-case letters, digits, '-'), "
                     "at most 59 characters, unique in the Session.",
                     min_length=1, max_length=MAX_APP_NAME, pattern=LABEL,
                     what=f"a DNS label (lower-case letters, digits, '-') of at most {MAX_APP_NAME} characters"),
        "io": Node("string", "How the app's standard streams are wired: tty (stdin and a terminal), pipe or streams "
                   "(stdin open, no terminal), none (no stdin); kubectl attach -i[t] reaches the first three.",
                   enum=IO_MODES, default="none", max_length=7),
        "ports": Node("array", "The ports the app serves; each is routed (the Session's Service and, for TCP with a "
                      "configured base domain, an Ingress host) once the Session is Ready.", max_items=16, items=PORT,
                      rules=(_PORT_ONCE,)),
    })


# -- env ----------------------------------------------------------------------------------------

_NO_VALUE = CelRule("!has(self.value)",
                 "\"a literal value is not accepted (it would be stored in the Session): put it in a Secret and "
                 "name that Secret's key in secretRef {name, key}\"",
                 lambda e: e.get("value") is None,
                 lambda e: "a literal value is not accepted (it would be stored in the Session): put it in a Secret "
                           "and name that Secret's key in secretRef {name, key}",
                 field=".value", reason="FieldValueForbidden")
_NO_VALUE_FROM = CelRule("!has(self.valueFrom)",
                      "\"valueFrom is not accepted: name the Secret's key in secretRef {name, key}\"",
                      lambda e: e.get("valueFrom") is None,
                      lambda e: "valueFrom is not accepted: name the Secret's key in secretRef {name, key}",
                      field=".valueFrom", reason="FieldValueForbidden")
_SECRET_REF = CelRule("has(self.secretRef)",
                   "'needs the Secret key {name, key} the variable takes its value from'",
                   lambda e: e.get("secretRef") is not None,
                   lambda e: "needs the Secret key {name, key} the variable takes its value from",
                   field=".secretRef", reason="FieldValueRequired")

ENV = Node(
    "object", "An environment variable whose value is a Secret key's.", required=("name",),
    rules=(_NO_VALUE, _NO_VALUE_FROM, _SECRET_REF), properties={
        "name": Node("string", "The environment variable's name.", min_length=1, max_length=256,
                     what="a variable name of 1-256 characters"),
        "secretRef": Node("object", "The Secret key whose value the variable takes (copied into a Secret kfold owns).",
                          required=("name", "key"), properties={
            "name": Node("string", "A Secret in the Session's namespace (a lower-case DNS subdomain).",
                         min_length=1, max_length=253, pattern=SUBDOMAIN, what="a Secret name (a lower-case DNS subdomain)"),
            "key": Node("string", "A key of that Secret's data.", min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$",
                        what="a Secret key (letters, digits, '-', '_', '.')"),
        }),
        "value": Node("string", "Not accepted: a literal value would be stored in the Session; use secretRef."),
        "valueFrom": Node("object", "Not accepted: use secretRef.",
                          extra={"x-kubernetes-preserve-unknown-fields": True}),
    })


# -- resources ----------------------------------------------------------------------------------

def _quantity_ok(v: Any) -> bool:
    text = str(v)
    q = quantity(text) if text == text.strip() else None
    return q is not None and q >= 0


_QUANTITY = CelRule(
    "isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('0')) >= 0",
    f"\"'%s' is not a Kubernetes quantity; {QUANTITY_EXAMPLES}\".format([string(self)])",
    _quantity_ok, lambda v: f"{str(v)!r} is not a Kubernetes quantity; {QUANTITY_EXAMPLES}")
_RESOURCE_NAMES = CelRule(
    f"self.all(k, k.matches('{RESOURCE_NAME.pattern}'))",
    f"\"'%s' is not a resource name (e.g. cpu, memory, nvidia.com/gpu)\""
    f".format([self.filter(k, !k.matches('{RESOURCE_NAME.pattern}'))[0]])",
    lambda m: all(RESOURCE_NAME.match(k) for k in m),
    lambda m: f"{next(k for k in m if not RESOURCE_NAME.match(k))!r} is not a resource name (e.g. cpu, memory, nvidia.com/gpu)")


def _resource_map(description: str) -> Node:
    return Node("object", description, max_properties=16, rules=(_RESOURCE_NAMES,),
                values=Node("int-or-string", "A Kubernetes quantity.", max_length=64, rules=(_QUANTITY,)))


# -- the spec -----------------------------------------------------------------------------------

SPEC = Node(
    "object", "What the Session runs. Checked here at admission and again by kfold, which also judges what "
    "depends on its config (the default image, the registered clusters, the configured ceilings) and the "
    "clone url's form, reporting a problem as phase Failed with a SpecValid condition naming the field.",
    properties={
        "image": Node("string", "The image of the workspace and app containers. Left out (or blank): the config's "
                      "sessions.default_image; with neither, kfold fails the Session (InvalidSpec naming spec.image).",
                      max_length=4096, what="an image reference of at most 4096 characters"),
        "imagePullPolicy": Node("string", "The imagePullPolicy of every container (Always, IfNotPresent or Never). "
                                "Left out: none is set, and the cluster's default applies (Always for an image "
                                "tagged :latest or untagged, else IfNotPresent).",
                                enum=PULL_POLICIES, max_length=12),
        "apps": Node("array", "One container app-<name> per app, next to the workspace container.",
                     max_items=16, items=APP, rules=(_UNIQUE_APPS, _UNIQUE_PORTS)),
        "env": Node("array", "Environment of every container, from Secret references only; literal values are refused.",
                    max_items=128, items=ENV),
        "repositories": Node("array", "Git repositories the node's cache agent keeps warm for the Session (Repo resources).",
                             max_items=64, items=Node("object", "A repository.", required=("url",), properties={
                                 "url": Node("string", "The clone url (https://, ssh:// or scp-like git@host:path).",
                                             min_length=1, max_length=2048, what="a clone url of at most 2048 characters"),
                             })),
        "cluster": Node("string", "Target cluster name (kfold cluster register); left out: the cluster the Session lives on.",
                        max_length=253, what="a cluster name of at most 253 characters"),
        "resources": Node("object", "Every container's limits and requests, clamped to the config's sessions.limits.",
                          properties={
                              "limits": _resource_map("Resource name -> quantity, e.g. {cpu: '2', memory: 4Gi}."),
                              "requests": _resource_map("Resource name -> quantity, e.g. {cpu: 500m, memory: 1Gi}."),
                          }),
        "workspace": Node("object", "The workspace volume (/workspace in every container).", properties={
            "seedConfigMap": Node("string", "A ConfigMap in the pod's namespace whose files are copied into a new "
                                  "workspace once (default: the config's workspace.seed_configmap).",
                                  max_length=253, pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$",
                                  what="a ConfigMap name (a lower-case DNS subdomain)"),
        }),
        "suspended": Node("boolean", "true: the pod is deleted, the Session kept (phase Suspended); false again: a "
                          "fresh pod generation.", default=False),
        "stopped": Node("boolean", "true: torn down for good (phase Stopped); deleting the Session tears down the same "
                        "way first.", default=False),
    })


def check_spec(raw: Any) -> Problem | None:
    return check(SPEC, raw, "spec")


def check_name(name: str) -> Problem | None:
    return check(NAME, name, "metadata.name")
