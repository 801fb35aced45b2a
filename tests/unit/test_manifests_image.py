"""The Deployment fits the image scripts/build_image.sh builds: its name, user, a read-only root
with only the journal directory and /tmp writable, and the version both report."""
import pytest
import yaml

from kfold import __version__
from kfold.cli import main
from kfold.daemon.manifests import DATA, DEFAULT_IMAGE, NONROOT, install


def _pod(config_text=None):
    (dep,) = [d for d in install("kfold", DEFAULT_IMAGE, config_text) if d["kind"] == "Deployment"]
    return dep["spec"]["template"]["spec"]


def test_the_default_image_is_the_built_one_and_runs_as_its_nonroot_user():
    assert DEFAULT_IMAGE == f"localhost/kfold:{__version__}"
    pod = _pod()
    (c,) = pod["containers"]
    assert c["image"] == DEFAULT_IMAGE
    assert {k: pod["securityContext"][k] for k in ("runAsUser", "runAsGroup", "fsGroup")} == \
        {"runAsUser": NONROOT, "runAsGroup": NONROOT, "fsGroup": NONROOT}
    assert c["securityContext"]["readOnlyRootFilesystem"] and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_only_the_journal_directory_and_tmp_are_writable_mounts():
    (c,) = _pod()["containers"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert set(mounts) == {"/etc/kfold", "/etc/kfold-metrics-tls", "/var/lib/kfold", "/tmp"}
    assert mounts["/etc/kfold"]["readOnly"] is True and mounts["/etc/kfold-metrics-tls"]["readOnly"] is True
    cfg = yaml.safe_load((DATA / "config.example.yaml").read_text())
    cfg["journal"]["path"] = "/data/kfold/j.db"
    (c,) = _pod(yaml.safe_dump(cfg))["containers"]
    assert {m["name"]: m["mountPath"] for m in c["volumeMounts"]}["journal"] == "/data/kfold"


def test_kfold_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"kfold {__version__}"
