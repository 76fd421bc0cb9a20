"""Package discovery: every package under addon/ and cli/ is found, none listed by hand.
The Markdown files in docs/ ship as ``firsttoken.docs`` (data only).

``addon/`` installs as ``firsttoken.addon`` and ``cli/`` as ``firsttoken.cli`` (the design
card's top level); ``firsttoken`` itself is a namespace. Everything else is in pyproject.toml.
"""

import warnings

from setuptools import find_packages, setup

# An editable install of this layout (addon/ and cli/ mapped under one namespace) goes through setuptools'
# import finder, which warns that a folder named like the package in the working directory could shadow
# it. No folder here is named firsttoken (tests/test_house.py checks), so the warning says nothing true
# of this project, and `pip install -e .` would print it to every contributor: it is silenced, alone.
warnings.filterwarnings("ignore", message=r"Editable installation\.(?s:.*)folders in your working directory")

ROOTS = {"addon": "firsttoken.addon", "cli": "firsttoken.cli"}
#: the user docs travel in the wheel: `firsttoken docs TOPIC` prints them from an installed copy
DOCS = "firsttoken.docs"

packages = [
    ROOTS[name.split(".", 1)[0]] + name[len(name.split(".", 1)[0]):]
    for name in find_packages(include=[f"{root}*" for root in ROOTS])
    if name.split(".", 1)[0] in ROOTS
]
setup(
    packages=[*packages, DOCS],
    package_dir={**{pkg: root for root, pkg in ROOTS.items()}, DOCS: "docs"},
    package_data={DOCS: ["*.md"]},
)
