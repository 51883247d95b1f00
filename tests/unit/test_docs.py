"""The product docs (README, docs/, contrib/*/README.md) link only files inside the repository,
and every relative link resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "SECURITY.md", *ROOT.glob("docs/*.md"), *ROOT.glob("contrib/*/README.md")])
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_inside_the_repository(doc):
    text = doc.read_text(encoding="utf-8")
    assert "shared/" not in text, "product docs never point at the internal spec"
    for target in LINK_RE.findall(text):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT), f"{doc.name} links {target} outside the repository"
        assert path.exists(), f"{doc.name} links {target}, which does not exist"


def test_security_md_has_the_threat_model_the_roles_and_how_to_report():
    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    for heading in ("## Threat model", "## Roles", "## Reporting a vulnerability"):
        assert heading in text
    assert "SECURITY.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_reference_exists_and_the_readme_links_it():
    assert (ROOT / "docs" / "reference.md").is_file()
    assert "](docs/reference.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_reference_documents_every_method_zcord_serves():
    from zcord.transport.methods import TABLE  # the one method table (issue 28)

    methods = [m.name for m in TABLE]
    assert "zcor/persona/set" in methods and "prompts/get" in methods
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    missing = [m for m in methods if m not in reference]
    assert missing == [], f"docs/reference.md does not mention {missing}"
