"""docs/record.md documents every column the record has."""

import re
from pathlib import Path

from firsttoken.addon.record import FIELDS


def test_every_record_field_is_documented():
    text = (Path(__file__).parent.parent / "docs" / "record.md").read_text()
    documented = set(re.findall(r"`([a-z_0-9]+)`", text))
    missing = [f for f in FIELDS if f not in documented]
    assert not missing, f"undocumented columns in docs/record.md: {missing}"
