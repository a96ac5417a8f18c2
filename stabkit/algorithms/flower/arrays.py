"""ndarrays to Flower Arrays and back, byte for byte what Flower's own ``Array(ndarray)`` and ``Array.numpy()``
do, without their per-array ``.npy`` header work.

A Flower Array holds an array as the bytes ``np.save`` writes: a header (magic, version, the dict of dtype,
order and shape as text) and then the array's buffer. The header of a C-ordered array depends on its dtype and
shape alone, so it is made once per dtype and shape (:func:`npy_header`, by Flower itself) and every Array
is that header joined to the buffer (:func:`to_array`): no ``np.save`` through a BytesIO, which cost more than
the rest of a W1 reply. Reading back (:func:`to_numpy`), bytes that start with the header expected of the
round's model are read past it (``np.load`` parses every header with ``ast.literal_eval``); anything else goes
through ``Array.numpy()``. Flower is imported on first use (an optional extra), once (:func:`flwr_app`): an
import statement in every reply costs as much as building its MetricRecord.
"""
from __future__ import annotations

import functools

import numpy as np


@functools.cache
def flwr_app():
    """Flower's record and message classes (the module ``flwr.app``)."""
    import flwr.app

    return flwr.app


@functools.cache
def npy_header(dtype: np.dtype, shape: tuple) -> tuple:
    """``(dtype, shape, stype, header)`` of the Array Flower makes of a C-ordered array of ``dtype`` and
    ``shape``: its fields and its bytes before the array's own."""
    zeros = np.zeros(shape, dtype)
    made = flwr_app().Array(zeros)
    return made.dtype, made.shape, made.stype, made.data[:len(made.data) - zeros.nbytes]


def to_array(value):
    """``value`` (an ndarray) as a fresh Flower Array, equal field by field to ``Array(value)``; an array
    that is not C-ordered takes Flower's own path, on a C-ordered copy."""
    a = np.asarray(value)
    if not a.flags.c_contiguous:
        return flwr_app().Array(np.array(a))
    dtype, shape, stype, header = npy_header(a.dtype, a.shape)
    return flwr_app().Array(dtype, shape, stype, b"".join((header, a.data)))


def to_numpy(array, like: np.ndarray) -> np.ndarray:
    """``array.numpy()`` (a fresh, writable ndarray); read directly when ``array`` holds an array of
    ``like``'s dtype and shape in C order (a strategy's mean of the replies)."""
    dtype, shape, stype, header = npy_header(like.dtype, like.shape)
    data = array.data
    if array.stype == stype and len(data) == len(header) + like.nbytes and data.startswith(header):
        return np.frombuffer(data, like.dtype, offset=len(header)).reshape(like.shape).copy()
    return array.numpy()
