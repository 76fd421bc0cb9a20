"""Package discovery: every package under addon/ and cli/ is found, none listed by hand.

``addon/`` installs as ``firsttoken.addon`` and ``cli/`` as ``firsttoken.cli`` (the design
card's top level); ``firsttoken`` itself is a namespace. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

ROOTS = {"addon": "firsttoken.addon", "cli": "firsttoken.cli"}

packages = [
    ROOTS[name.split(".", 1)[0]] + name[len(name.split(".", 1)[0]):]
    for name in find_packages(include=[f"{root}*" for root in ROOTS])
    if name.split(".", 1)[0] in ROOTS
]
setup(packages=packages, package_dir={pkg: root for root, pkg in ROOTS.items()})
