"""The CRDs read as an API: every field of every served version has a description (what
``kubectl explain`` prints), the printer columns a user reads first, categories and short names."""
from kfold.daemon.manifests import crds


def undescribed(schema, path):
    out = [] if schema.get("description") else [path]
    for name, sub in (schema.get("properties") or {}).items():
        if f"{path}.{name}".count(".") == 1 and name == "metadata":
            # the apiserver's ObjectMeta: a CRD may only restrict name (no description allowed)
            out += undescribed(sub["properties"]["name"], f"{path}.metadata.name")
            continue
        out += undescribed(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        out += [p for p in undescribed(schema["items"], f"{path}[]") if p != f"{path}[]"]
    return out


def test_every_field_has_a_description_for_kubectl_explain():
    for crd in crds():
        for version in crd["spec"]["versions"]:
            root = version["schema"]["openAPIV3Schema"]
            assert undescribed(root, crd["spec"]["names"]["kind"]) == [], crd["metadata"]["name"]


def test_session_columns_categories_and_short_names():
    by = {c["spec"]["names"]["kind"]: c for c in crds()}
    (version,) = by["Session"]["spec"]["versions"]
    shown = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert shown == ["Ready", "Phase", "Reason", "Pod", "URL", "Age"]
    for kind, short in (("Session", "kfs"), ("Repo", "kfr")):
        assert by[kind]["spec"]["names"]["categories"] == ["kfold"]
        assert short in by[kind]["spec"]["names"]["shortNames"]
