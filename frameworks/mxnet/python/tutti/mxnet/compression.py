"""Gradient compression applied around a collective: Compression.none and Compression.fp16."""

import numpy
from tutti.common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 and restores their dtype afterwards."""

    @staticmethod
    def compress(tensor):
        dtype = tensor.dtype
        if numpy.dtype(dtype).kind == "f" and numpy.dtype(dtype) != numpy.float16:
            return tensor.astype("float16"), dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.astype(ctx)


class Compression:
    """The compressors, as Horovod names them."""

    none = NoneCompressor
    fp16 = FP16Compressor
