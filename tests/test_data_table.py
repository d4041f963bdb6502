"""Data is declared once (cysrc/data.pxi, _DATA_TABLE): the table gives every
field's place in its buffer and each buffer's size.  The fields Data shows are
disjoint slices of its memory, in table order, of the documented shapes, and the
buffers hold exactly the table's fields plus their spares (so a field added to
the table is carved, counted in nbytes and, with a name, shown)."""
import numpy as np
import pytest

import treedyn as td
from oracles import random_tree

SHOWN = {"liMi": 12, "sMi": 12, "sv": 6, "sa_gf": 6, "sf": 6, "sJ": 6, "S": 6, "v": 6,
         "a_gf": 6, "f": 6, "oMi": 12, "a": 6, "hJ": 6, "hv": 6, "ha_gf": 6, "hf": 6,
         "sc": 6, "sIc": 10, "sIA": 21, "spA": 6}
PER_DOF = {"sJ", "S", "hJ"}


@pytest.mark.parametrize("model", [
    td.load(td.robots.path("panda.urdf")),
    td.load(td.robots.path("delta.toml")),
    td.load(td.robots.path("humanoid.urdf"), floating_base=True),
    random_tree(np.random.default_rng(3), n=12),
], ids=["panda", "delta", "humanoid", "tree"])
def test_the_fields_follow_the_table(model):
    d = model.create_data()
    assert {n for n in dir(d) if n in SHOWN} == set(SHOWN)
    spans = []
    for name, width in SHOWN.items():
        arr = getattr(d, name)
        rows = model.nv if name in PER_DOF else model.n_bodies
        assert arr.shape == (rows, width), name
        assert not arr.flags.writeable
        start = arr.__array_interface__["data"][0]
        spans.append((start, start + arr.nbytes, name))
    spans.sort()
    for (a0, a1, n0), (b0, b1, n1) in zip(spans, spans[1:]):
        assert a1 <= b0, (n0, n1)           # disjoint
    # the main buffer: 185 doubles per body and 37 per freedom (the table's rows)
    # plus 8 spare at each end, before the other buffers
    nb, nv1 = model.n_bodies, max(model.nv, 1)
    assert spans[-1][1] - spans[0][0] <= 8 * (185 * nb + 37 * nv1)
    base = np.asarray(d.liMi).base
    assert base.nbytes == 8 * (185 * nb + 37 * nv1 + 16)


def test_an_unknown_field_is_an_attribute_error():
    d = td.load(td.robots.path("panda.urdf")).create_data()
    with pytest.raises(AttributeError, match="oMj"):
        d.oMj
