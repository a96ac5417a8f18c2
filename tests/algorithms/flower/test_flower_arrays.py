"""The bridge's Flower Arrays (:mod:`stabkit.algorithms.flower.arrays`) are Flower's own, byte for byte, and
read back to what ``Array.numpy()`` returns, for every dtype, shape and memory order."""
import numpy as np
import pytest

from stabkit.algorithms.flower.arrays import to_array, to_numpy

flwr = pytest.importorskip("flwr")

ARRAYS = {
    "flat float32": np.arange(610, dtype=np.float32) / 7,
    "matrix float64": np.arange(12.0).reshape(3, 4),
    "scalar": np.array(1.5, np.float16),
    "empty": np.zeros((0, 3), np.float32),
    "big-endian int": np.arange(5, dtype=">i4"),
    "bool": np.array([True, False, True]),
    "fortran order": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
    "strided": np.arange(20.0)[::3],
    "row of a batch": np.arange(24, dtype=np.float32).reshape(2, 3, 4)[1, 2],
}


def fields(array) -> tuple:
    return array.dtype, array.shape, array.stype, array.data


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_to_array_is_flowers_array(name):
    value = ARRAYS[name]
    assert fields(to_array(value)) == fields(flwr.app.Array(np.array(value)))


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_to_numpy_is_arrays_numpy(name):
    value = ARRAYS[name]
    made = flwr.app.Array(value)
    for like in (value, np.zeros(3, np.float32)):  # the array's own dtype and shape, and another
        got, expected = to_numpy(made, like), made.numpy()
        assert (got.dtype, got.shape, got.flags.writeable) == (expected.dtype, expected.shape, True)
        assert got.tobytes() == expected.tobytes()
