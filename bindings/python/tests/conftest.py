import json
import pathlib

import pytest

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "vectors.json"


@pytest.fixture(scope="session")
def vectors():
    return json.loads(VECTORS.read_text())
